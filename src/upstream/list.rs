//! The reflectors' full LIST (also `grid-wrapper check`'s): one request, then `continue` pages if
//! the upstream paginates unasked.

use crate::handoff::{ListItems, Oversized, Texts};
use crate::k8s::Resource;
use crate::upstream::client::{UpstreamError, MAX_LIST_BYTES};
use crate::upstream::decode::{DecodeError, ListResult};
use crate::upstream::domain::RvOrigin;
use crate::upstream::kind::with_query;
use crate::upstream::reflector::ListWatch;

/// Most pages followed in one list (only if the upstream paginates unasked).
pub const MAX_LIST_PAGES: usize = 10_000;

/// A full LIST of `kind` as the reflectors make it (kube-proxy's selector where it applies;
/// `resourceVersion=rv`, omitted when empty), following `continue` pages (at most
/// [`MAX_LIST_PAGES`]) if the upstream paginates unasked. Also used by `grid-wrapper check`.
pub fn list_all<L: ListWatch + ?Sized>(
    lw: &L,
    kind: Resource,
    rv: &str,
) -> Result<ListResult, UpstreamError> {
    let mut texts = Texts::default();
    let mut all = list_all_into(lw, kind, rv, None, &mut texts)?;
    all.items = texts.0;
    Ok(all)
}

/// [`list_all`], every item of every page handed to `items` as it is read (the reflectors':
/// the cache prepares each item as it comes). The answer's `items` is empty. `rv_from`: the
/// server that issued `rv` (it is sent only to a server of its domain); the `continue` pages go
/// only to a server of the first page's domain (a token is its issuer's).
pub fn list_all_into<L: ListWatch + ?Sized>(
    lw: &L,
    kind: Resource,
    rv: &str,
    rv_from: Option<RvOrigin>,
    items: &mut dyn ListItems,
) -> Result<ListResult, UpstreamError> {
    let sel = kind.label_selector().unwrap_or("");
    let limit = lw.max_list_items();
    let mut taker = Pages {
        items,
        limit,
        total: 0,
        bytes: 0,
        max_bytes: MAX_LIST_BYTES,
        page: None,
    };
    let listed = lw.list_into(
        &with_query(
            kind.path(),
            &[("labelSelector", sel), ("resourceVersion", rv)],
        ),
        &mut taker,
        rv_from,
    );
    // Passing a bound stops the read, which then fails for a body cut short: the bound is
    // the reason.
    taker.within_bounds()?;
    let mut all = listed?;
    let mut pages = 1;
    while let Some(token) = all.continue_token.take() {
        if pages >= MAX_LIST_PAGES {
            return Err(UpstreamError::Decode(DecodeError::Missing(
                "end of paginated list",
            )));
        }
        // A page adds to the items so far: it must not clear them.
        taker.page = Some(Page::default());
        let page = lw.list_into(
            &with_query(kind.path(), &[("continue", &token), ("labelSelector", sel)]),
            &mut taker,
            all.origin,
        );
        taker.within_bounds()?;
        let page = page?;
        if taker.page.is_some_and(|p| p.restarted) {
            return Err(UpstreamError::Unreachable(
                "a page of a paginated list was cut short and read again from another server; \
                 the whole list is read again"
                    .into(),
            ));
        }
        all.resource_version = page.resource_version;
        all.continue_token = page.continue_token;
        all.origin = page.origin.or(all.origin);
        pages += 1;
    }
    Ok(all)
}

/// The taker of every page of one list: the items of a later page are added to the earlier
/// pages' (a page read again from another server would repeat its items, so a page cut short
/// fails the whole list), and all pages together bring at most `--max-list-items`
/// ([`ListWatch::max_list_items`]) and [`MAX_LIST_BYTES`] of items (one page's body bound,
/// which would otherwise hold per page): the item past a bound is not handed on and makes the
/// taker [`ListItems::full`], so that the reader stops and the list fails (the items handed on
/// are then part of no applied list).
struct Pages<'a> {
    items: &'a mut dyn ListItems,
    limit: usize,
    /// Items offered, all pages (one more than the bound, at most).
    total: usize,
    /// Bytes of the items handed on, all pages, and of the one refused for passing the bound.
    bytes: u64,
    /// The most bytes of items ([`MAX_LIST_BYTES`]).
    max_bytes: u64,
    /// Reading a later page (`None`: the first).
    page: Option<Page>,
}

impl Pages<'_> {
    /// The bound passed, if one was: the bytes of items, or `--max-list-items`.
    fn within_bounds(&self) -> Result<(), UpstreamError> {
        if self.bytes > self.max_bytes {
            Err(UpstreamError::TooLarge {
                limit: self.max_bytes,
            })
        } else if self.full() {
            Err(UpstreamError::TooManyItems { limit: self.limit })
        } else {
            Ok(())
        }
    }
}

/// A later page being read.
#[derive(Clone, Copy, Debug, Default)]
struct Page {
    /// Its items handed on.
    pushed: usize,
    /// It was cut short and read again.
    restarted: bool,
}

impl ListItems for Pages<'_> {
    fn push(&mut self, text: Box<str>) {
        if self.full() {
            return;
        }
        self.bytes = self.bytes.saturating_add(text.len() as u64);
        self.total = self.total.saturating_add(1);
        if self.full() {
            return;
        }
        if let Some(p) = &mut self.page {
            p.pushed += 1;
        }
        self.items.push(text);
    }
    fn clear(&mut self) {
        match &mut self.page {
            // Before the page's first item, a (re)start changes nothing.
            Some(p) => p.restarted |= p.pushed > 0,
            None => {
                self.total = 0;
                self.bytes = 0;
                self.items.clear();
            }
        }
    }
    fn len(&self) -> usize {
        self.items.len()
    }
    fn skipped(&mut self, item: Oversized) {
        self.items.skipped(item);
    }
    fn full(&self) -> bool {
        self.total > self.limit || self.bytes > self.max_bytes
    }
    fn facts_only_except(&self) -> Option<&str> {
        self.items.facts_only_except()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::upstream::client::WatchStream;
    use serde_json::Value;

    /// Two pages; the second is read, cut short, and read again from the start (as a failover
    /// to another server does) when `retried`.
    struct TwoPages {
        retried: bool,
        /// `--max-list-items`.
        limit: usize,
    }

    fn page(items: &[&str], token: Option<&str>) -> ListResult {
        ListResult {
            items: items
                .iter()
                .map(|n| format!(r#"{{"n":"{n}"}}"#).into())
                .collect(),
            resource_version: "5".into(),
            continue_token: token.map(str::to_string),
            origin: None,
        }
    }

    impl ListWatch for TwoPages {
        fn list(&self, q: &str, _: Option<RvOrigin>) -> Result<ListResult, UpstreamError> {
            Ok(match q.contains("continue=") {
                false => page(&["a", "b"], Some("t")),
                true => page(&["c"], None),
            })
        }
        fn list_into(
            &self,
            q: &str,
            items: &mut dyn ListItems,
            _: Option<RvOrigin>,
        ) -> Result<ListResult, UpstreamError> {
            let mut list = self.list(q, None)?;
            items.clear();
            if self.retried && q.contains("continue=") {
                items.push(r#"{"n":"c"}"#.into());
                items.clear();
            }
            list.items.drain(..).for_each(|t| items.push(t));
            Ok(list)
        }
        fn watch(
            &self,
            _: &str,
            _: bool,
            _: Option<RvOrigin>,
        ) -> Result<WatchStream, UpstreamError> {
            Err(UpstreamError::Unreachable("no watch here".into()))
        }
        fn get_json(&self, _: &str) -> Result<Value, UpstreamError> {
            Err(UpstreamError::Unreachable("no get here".into()))
        }
        fn max_list_items(&self) -> usize {
            self.limit
        }
    }

    #[test]
    fn pages_add_to_the_items_and_a_page_read_twice_fails_the_list() {
        let mut texts = Texts::default();
        let lw = TwoPages {
            retried: false,
            limit: 10,
        };
        let all = list_all_into(&lw, Resource::Services, "0", None, &mut texts).unwrap();
        assert!(all.items.is_empty());
        assert_eq!(all.resource_version, "5");
        let names: Vec<&str> = texts.0.iter().map(|t| &t[6..7]).collect();
        assert_eq!(names, ["a", "b", "c"]);
        // The same through `list_all`, which collects the texts.
        assert_eq!(
            list_all(&lw, Resource::Services, "0").unwrap().items,
            texts.0
        );

        // A second page read again would repeat its first items after the earlier pages'.
        let lw = TwoPages {
            retried: true,
            limit: 10,
        };
        let err = list_all_into(&lw, Resource::Services, "0", None, &mut texts).unwrap_err();
        assert!(err.to_string().contains("read again"), "{err}");
    }

    /// `--max-list-items` holds for all pages together: one item more than the bound fails the
    /// list, and nothing past the bound is handed on.
    #[test]
    fn the_item_bound_counts_every_page() {
        let lw = TwoPages {
            retried: false,
            limit: 2,
        };
        let mut texts = Texts::default();
        let err = list_all_into(&lw, Resource::Services, "0", None, &mut texts).unwrap_err();
        assert_eq!(err, UpstreamError::TooManyItems { limit: 2 });
        assert_eq!(texts.0.len(), 2, "nothing past the bound");
        assert!(err.to_string().contains("--max-list-items=2"), "{err}");
        let lw = TwoPages {
            retried: false,
            limit: 1,
        };
        let err = list_all(&lw, Resource::Services, "0").unwrap_err();
        assert_eq!(err, UpstreamError::TooManyItems { limit: 1 });
    }

    /// The items' bytes are bounded for all pages together, as one page's body is.
    #[test]
    fn the_byte_bound_counts_every_page() {
        let mut texts = Texts::default();
        let mut taker = Pages {
            items: &mut texts,
            limit: 10,
            total: 0,
            bytes: 0,
            max_bytes: 20,
            page: None,
        };
        taker.push(r#"{"n":"a"}"#.into());
        taker.page = Some(Page::default());
        taker.push(r#"{"n":"b"}"#.into());
        assert!(taker.within_bounds().is_ok(), "18 bytes");
        taker.push(r#"{"n":"c"}"#.into());
        assert!(taker.full());
        assert_eq!(
            taker.within_bounds(),
            Err(UpstreamError::TooLarge { limit: 20 })
        );
        taker.push(r#"{}"#.into());
        assert_eq!(texts.0.len(), 2, "nothing past the bound");
    }
}
