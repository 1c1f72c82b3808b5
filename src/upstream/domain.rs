//! Following relays (`--relay-kubeconfig`, `--relay-servers`): what each server of the one
//! ordered server list is ([`Role`]: a site relay or the cloud upstream) and which
//! resourceVersion space its answers belong to ([`RvOrigin`], [`domains`]). Every relay process
//! numbers its own resourceVersions (its epoch above a counter), so each relay is a domain of its
//! own; the cloud servers (`--kubeconfig`/`--master`/in-cluster) serve one etcd and share one
//! domain. An RV may only be sent back (a watch, a relist "not older than", a `continue` page)
//! to a server of the domain that issued it (docs/SEMANTICS.md §8.1). Pure.

use std::fmt;

/// What a server of the list is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    /// A site relay (another grid-wrapper serving the relay API): its own credentials
    /// (`--relay-kubeconfig`) and its own resourceVersions.
    Relay,
    /// The cloud upstream (`--kubeconfig`/`--master`/in-cluster): its credentials, one
    /// resourceVersion space for all of its servers.
    Cloud,
}

impl Role {
    /// The label value (`relay`, `cloud`).
    pub fn name(self) -> &'static str {
        match self {
            Role::Relay => "relay",
            Role::Cloud => "cloud",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Where a resourceVersion came from: the server that issued it (its index in the server list),
/// that server's domain ([`domains`]) and its role.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RvOrigin {
    /// Index of the server in the list (relays first, then the cloud servers).
    pub server: usize,
    /// The resourceVersion space: equal for servers whose RVs may be used on each other.
    pub domain: usize,
    /// What the server is: a relay's RVs are grid-wrapper's (its epoch above a counter).
    pub role: Role,
}

/// The domain of each server of `roles`: a relay's is its own index, every cloud server's is the
/// index of the first cloud server.
pub fn domains(roles: &[Role]) -> Vec<usize> {
    let first_cloud = roles.iter().position(|r| *r == Role::Cloud);
    roles
        .iter()
        .enumerate()
        .map(|(i, r)| match (r, first_cloud) {
            (Role::Cloud, Some(c)) => c,
            _ => i,
        })
        .collect()
}

/// `relays` relay servers then `cloud` cloud servers, the order of the server list.
pub fn roles(relays: usize, cloud: usize) -> Vec<Role> {
    std::iter::repeat_n(Role::Relay, relays)
        .chain(std::iter::repeat_n(Role::Cloud, cloud))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_relay_is_its_own_domain_and_the_cloud_servers_share_one() {
        let r = roles(2, 3);
        assert_eq!(
            r,
            [
                Role::Relay,
                Role::Relay,
                Role::Cloud,
                Role::Cloud,
                Role::Cloud
            ]
        );
        assert_eq!(domains(&r), [0, 1, 2, 2, 2]);
        assert_eq!(domains(&roles(0, 2)), [0, 0]);
        assert_eq!(domains(&roles(1, 0)), [0]);
        assert_eq!(Role::Relay.to_string(), "relay");
    }
}
