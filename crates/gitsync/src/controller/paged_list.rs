//! Reading a LIST in pages.
//!
//! Every list gitsync's controller makes (live objects of a kind, tracking objects, the
//! contents of a Namespace) can be as large as the cluster. Read in pages, a list of 100,000
//! objects is never one response held whole next to the values made from it.

use std::future::Future;

use kube::api::{ListParams, ObjectList};

/// Objects per list request: kube-apiserver's own page size for informers.
pub(super) const LIST_PAGE: u32 = 500;

/// Reads a list page after page, following the continue token, and hands each page's items to
/// `each`. `list` makes one request with the parameters it is given (`ListParams::default()`
/// with the page size and, after the first page, the token). The first error ends the read;
/// the pages before it were handed over.
pub(super) async fn for_each_page<T, E, Page>(
    mut list: impl FnMut(ListParams) -> Page,
    mut each: impl FnMut(Vec<T>),
) -> Result<(), E>
where
    T: Clone,
    Page: Future<Output = Result<ObjectList<T>, E>>,
{
    let mut params = ListParams::default().limit(LIST_PAGE);
    loop {
        let page = list(params.clone()).await?;
        each(page.items);
        match page.metadata.continue_.filter(|token| !token.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => return Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::api::ListMeta;

    fn page(items: &[u32], next: Option<&str>) -> ObjectList<u32> {
        ObjectList {
            types: Default::default(),
            metadata: ListMeta {
                continue_: next.map(str::to_owned),
                ..ListMeta::default()
            },
            items: items.to_vec(),
        }
    }

    #[tokio::test]
    async fn every_page_is_read_by_following_the_continue_token() {
        let mut asked = Vec::new();
        let mut seen = Vec::new();
        let read: Result<(), ()> = for_each_page(
            |params: ListParams| {
                asked.push((params.limit, params.continue_token.clone()));
                let answer = match params.continue_token.as_deref() {
                    None => page(&[1, 2], Some("a")),
                    Some("a") => page(&[3], Some("b")),
                    // An empty token ends the list, as kube-apiserver sends it.
                    _ => page(&[4], Some("")),
                };
                async move { Ok(answer) }
            },
            |items| seen.extend(items),
        )
        .await;
        assert_eq!(read, Ok(()));
        assert_eq!(seen, [1, 2, 3, 4]);
        assert_eq!(
            asked,
            [
                (Some(LIST_PAGE), None),
                (Some(LIST_PAGE), Some("a".to_owned())),
                (Some(LIST_PAGE), Some("b".to_owned())),
            ]
        );
    }

    #[tokio::test]
    async fn an_error_ends_the_read_after_the_pages_before_it() {
        let mut seen = Vec::new();
        let read = for_each_page(
            |params: ListParams| async move {
                match params.continue_token {
                    None => Ok(page(&[1], Some("a"))),
                    Some(_) => Err("gone"),
                }
            },
            |items| seen.extend(items),
        )
        .await;
        assert_eq!(read, Err("gone"));
        assert_eq!(seen, [1]);
    }
}
