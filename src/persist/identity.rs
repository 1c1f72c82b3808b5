//! A snapshot's identity (pure): the node (`--hostname`), the cloud upstream's servers and a
//! fingerprint of its CA, and which snapshot identities this process accepts.
//!
//! The servers are written as a set (sorted, without duplicates or a trailing `/`), so the order
//! of `--master` URLs changes nothing. A snapshot is accepted when it was written for the same
//! node and CA and its servers share at least one URL with this process's: every server of one
//! side serves one cluster ([`crate::upstream::kubeconfig::UpstreamConfig::servers`]), so a
//! shared server is the same cluster, and adding or removing a master (a control-plane node
//! replaced) keeps the snapshot an edge node needs when it restarts offline. The site relays are
//! never part of it: their objects are the cloud's, and a follower moves between them and the
//! cloud without losing its snapshot.
//!
//! Snapshots written before the set (one URL: the primary `--master` server) read as a set of
//! one, so they are accepted while that server is still one of this process's; with a single
//! server the text is what it always was.

use std::collections::BTreeSet;

use crate::cache::snapshot::Identity;

/// FNV-1a, 64 bits: a fingerprint, not a security measure.
fn fingerprint(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Separates the CA fingerprint from the servers in [`Identity::upstream`].
const CA_MARK: &str = " ca=";

/// A server URL as the identity compares it.
fn normal(server: &str) -> &str {
    server.trim_end_matches('/')
}

/// What a snapshot is tied to: the local node, the cloud upstream's servers (in any order) and
/// its CA. `upstream` reads `<url> <url>… ca=<fingerprint|system>`.
pub fn identity(hostname: &str, servers: &[&str], ca_pem: Option<&[u8]>) -> Identity {
    let ca = ca_pem.map_or_else(
        || "system".to_string(),
        |p| format!("{:016x}", fingerprint(p)),
    );
    let set: BTreeSet<&str> = servers.iter().map(|s| normal(s)).collect();
    let servers: Vec<&str> = set.into_iter().collect();
    Identity {
        hostname: hostname.to_string(),
        upstream: format!("{}{CA_MARK}{ca}", servers.join(" ")),
    }
}

/// The servers and the CA of an [`Identity::upstream`] (`None` without a CA part: not ours).
fn parts(upstream: &str) -> Option<(BTreeSet<&str>, &str)> {
    let (servers, ca) = upstream.rsplit_once(CA_MARK)?;
    let set = servers
        .split(' ')
        .filter(|s| !s.is_empty())
        .map(normal)
        .collect();
    Some((set, ca))
}

/// Whether this process (`ours`) may serve a snapshot written as `theirs`: the same node, the
/// same CA, and at least one server in common.
pub fn accepts(ours: &Identity, theirs: &Identity) -> bool {
    if ours == theirs {
        return true;
    }
    if ours.hostname != theirs.hostname {
        return false;
    }
    match (parts(&ours.upstream), parts(&theirs.upstream)) {
        (Some((our_servers, our_ca)), Some((their_servers, their_ca))) => {
            our_ca == their_ca && !our_servers.is_disjoint(&their_servers)
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "https://10.0.0.1:6443";
    const B: &str = "https://10.0.0.2:6443";
    const C: &str = "https://10.0.0.3:6443";

    #[test]
    fn the_order_of_the_servers_changes_nothing() {
        let ab = identity("edge-a1", &[A, B], Some(b"ca"));
        let ba = identity("edge-a1", &[B, A], Some(b"ca"));
        assert_eq!(ab, ba);
        assert_eq!(
            ab.upstream,
            format!("{A} {B} ca={:016x}", fingerprint(b"ca"))
        );
        let slash = identity("edge-a1", &[&format!("{B}/"), A, A], Some(b"ca"));
        assert_eq!(slash, ab, "duplicates and a trailing / are one server");
    }

    #[test]
    fn one_server_reads_as_it_always_did() {
        let id = identity("edge-a1", &[A], None);
        assert_eq!(id.upstream, format!("{A} ca=system"));
    }

    #[test]
    fn a_snapshot_is_accepted_for_the_same_node_ca_and_a_shared_server() {
        let ours = identity("edge-a1", &[B, A], Some(b"ca"));
        // Written by an older binary with --master=A,B: its primary server alone.
        let old = identity("edge-a1", &[A], Some(b"ca"));
        assert!(accepts(&ours, &old));
        assert!(accepts(&ours, &identity("edge-a1", &[A, B], Some(b"ca"))));
        assert!(
            accepts(&ours, &identity("edge-a1", &[B, C], Some(b"ca"))),
            "a master added and one removed: still the cluster of B"
        );
        assert!(!accepts(&ours, &identity("edge-a1", &[C], Some(b"ca"))));
        assert!(!accepts(&ours, &identity("edge-b1", &[A, B], Some(b"ca"))));
        assert!(!accepts(
            &ours,
            &identity("edge-a1", &[A, B], Some(b"other"))
        ));
        assert!(!accepts(&ours, &identity("edge-a1", &[A, B], None)));
        let odd = Identity {
            hostname: "edge-a1".into(),
            upstream: A.into(),
        };
        assert!(!accepts(&ours, &odd), "no CA part: not a snapshot of ours");
    }
}
