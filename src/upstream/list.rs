//! The reflectors' full LIST (also `grid-wrapper check`'s): one request, then `continue` pages if
//! the upstream paginates unasked.

use crate::upstream::client::UpstreamError;
use crate::upstream::decode::{DecodeError, ListResult};
use crate::upstream::kind::{with_query, UpstreamKind};
use crate::upstream::reflector::ListWatch;

/// Most pages followed in one list (only if the upstream paginates unasked).
pub const MAX_LIST_PAGES: usize = 10_000;

/// A full LIST of `kind` as the reflectors make it (kube-proxy's selector where it applies;
/// `resourceVersion=rv`, omitted when empty), following `continue` pages (at most
/// [`MAX_LIST_PAGES`]) if the upstream paginates unasked. Also used by `grid-wrapper check`.
pub fn list_all<L: ListWatch + ?Sized>(
    lw: &L,
    kind: UpstreamKind,
    rv: &str,
) -> Result<ListResult, UpstreamError> {
    let sel = kind.label_selector().unwrap_or("");
    let mut all = lw.list(&with_query(
        kind.path(),
        &[("labelSelector", sel), ("resourceVersion", rv)],
    ))?;
    let mut pages = 1;
    while let Some(token) = all.continue_token.take() {
        if pages >= MAX_LIST_PAGES {
            return Err(UpstreamError::Decode(DecodeError::Missing(
                "end of paginated list",
            )));
        }
        let page = lw.list(&with_query(
            kind.path(),
            &[("continue", &token), ("labelSelector", sel)],
        ))?;
        all.items.extend(page.items);
        all.resource_version = page.resource_version;
        all.continue_token = page.continue_token;
        pages += 1;
    }
    Ok(all)
}
