//! `session.*` methods that need more than a direct engine call.

use forge_core::FeedItem;
use forge_proto::error::rpc_error;
use forge_proto::methods::RpcResult;
use forge_proto::params::{EventsParams, SubscribeParams};
use forge_proto::{ErrorKind, SessionEvent};
use jsonrpsee::core::SubscriptionResult;
use jsonrpsee::{PendingSubscriptionSink, SubscriptionSink};
use serde_json::value::RawValue;

use super::{ConnServer, to_rpc};
use crate::follow::Outlet;

pub async fn events(server: &ConnServer, p: EventsParams) -> RpcResult<Vec<SessionEvent>> {
    let (_, bodies) =
        server.engine().events(&p.session, p.after_seq, p.limit.unwrap_or(10_000)).await.map_err(to_rpc)?;
    bodies
        .iter()
        .map(|b| {
            serde_json::from_str(b)
                .map_err(|e| rpc_error(ErrorKind::Internal, format!("a stored event does not decode: {e}")))
        })
        .collect()
}

pub async fn subscribe(
    server: &ConnServer,
    pending: PendingSubscriptionSink,
    p: SubscribeParams,
) -> SubscriptionResult {
    let from_seq = p.from_seq;
    let following = match server.conn().subscription() {
        Ok(f) => f,
        Err(e) => {
            pending.reject(forge_proto::error::rpc_error(forge_proto::ErrorKind::Overloaded, e)).await;
            return Ok(());
        }
    };
    let feed = match server.engine().subscribe(&p.session, from_seq).await {
        Ok(f) => f,
        Err(e) => {
            pending.reject(to_rpc(e)).await;
            return Ok(());
        }
    };
    let sink = pending.accept().await?;
    tracing::debug!(conn = server.conn.id, session = feed.session_id(), ?from_seq, "subscribed");
    crate::follow::follow(feed, WebSocket(sink), following).await;
    Ok(())
}

/// A WebSocket subscription: each item a `session.event` notification
/// through jsonrpsee's sink.
struct WebSocket(SubscriptionSink);

impl Outlet for WebSocket {
    async fn send(&self, _item: &FeedItem, json: String) -> Result<(), ()> {
        let raw = RawValue::from_string(json).map_err(drop)?;
        self.0.send(raw).await.map_err(drop)
    }

    async fn closed(&self) {
        self.0.closed().await
    }
}

/// Most bytes of export lines one `session.export` answer carries (the
/// socket's messages are limited to 8 MiB).
const EXPORT_PAGE_BYTES: usize = 4 * 1024 * 1024;

/// The lines of an export from `offset`, as many as fit a page.
pub fn export_page(lines: Vec<serde_json::Value>, offset: u64) -> forge_proto::ExportResult {
    let session_id = lines.first().and_then(|l| l.get("id")).and_then(|v| v.as_str()).unwrap_or_default().to_string();
    let total = lines.len();
    let mut page = Vec::new();
    let mut bytes = 0;
    for line in lines.into_iter().skip(offset as usize) {
        let size = line.to_string().len();
        // One line always goes, however long: the next page would hold it no better.
        if !page.is_empty() && bytes + size > EXPORT_PAGE_BYTES {
            break;
        }
        bytes += size;
        page.push(line);
    }
    let end = offset as usize + page.len();
    forge_proto::ExportResult { session_id, lines: page, next: (end < total).then_some(end as u64) }
}

/// Import pieces kept until their last one, by upload id.
#[derive(Default)]
pub struct Uploads {
    pending: std::sync::Mutex<std::collections::HashMap<String, (Vec<serde_json::Value>, std::time::Instant)>>,
}

pub enum Upload {
    Kept { upload: String, received: u64 },
    Complete(Vec<serde_json::Value>),
}

/// An upload not continued for this long is dropped.
const UPLOAD_IDLE: std::time::Duration = std::time::Duration::from_secs(600);
/// Most pieces kept at once (every upload's lines count).
const MAX_UPLOAD_LINES: usize = 5_000_000;

impl Uploads {
    /// Adds a piece: kept while `more`, else the whole upload is returned.
    pub fn add(
        &self,
        upload: Option<String>,
        lines: Vec<serde_json::Value>,
        more: bool,
    ) -> Result<Upload, forge_core::EngineError> {
        let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        pending.retain(|_, (_, at)| at.elapsed() < UPLOAD_IDLE);
        let mut all = match &upload {
            Some(id) => pending.remove(id).map(|(l, _)| l).ok_or_else(|| {
                forge_core::EngineError::new(
                    ErrorKind::InvalidParams,
                    format!("no import upload {id} (it was finished, or dropped after 10 idle minutes): start again"),
                )
            })?,
            None => Vec::new(),
        };
        all.extend(lines);
        if !more {
            return Ok(Upload::Complete(all));
        }
        let held: usize = pending.values().map(|(l, _)| l.len()).sum::<usize>() + all.len();
        if held > MAX_UPLOAD_LINES {
            return Err(forge_core::EngineError::new(
                ErrorKind::Overloaded,
                "too many import lines held at once; retry later",
            ));
        }
        let id = upload.unwrap_or_else(|| forge_core::ids::new_id("u"));
        let received = all.len() as u64;
        pending.insert(id.clone(), (all, std::time::Instant::now()));
        Ok(Upload::Kept { upload: id, received })
    }
}

#[cfg(test)]
mod export_tests {
    use super::*;

    #[test]
    fn a_long_export_comes_in_pages_that_together_are_the_whole() {
        let big = "x".repeat(1024 * 1024);
        let mut lines = vec![serde_json::json!({"type": "session", "id": "s1"})];
        lines.extend((0..10).map(|i| serde_json::json!({"type": "node", "id": i, "text": big})));
        let (mut offset, mut got, mut pages) = (0, Vec::new(), 0);
        loop {
            let page = export_page(lines.clone(), offset);
            assert_eq!(page.session_id, "s1");
            let size: usize = page.lines.iter().map(|l| l.to_string().len()).sum();
            assert!(size <= EXPORT_PAGE_BYTES, "a page fits a message: {size}");
            got.extend(page.lines);
            pages += 1;
            match page.next {
                Some(n) => offset = n,
                None => break,
            }
        }
        assert_eq!(got, lines);
        assert!(pages >= 3, "{pages} pages");
    }

    #[test]
    fn import_pieces_are_kept_until_the_last_and_an_unknown_upload_is_refused() {
        let uploads = Uploads::default();
        let line = |i: u64| serde_json::json!({"n": i});
        let Ok(Upload::Kept { upload, received }) = uploads.add(None, vec![line(1), line(2)], true) else {
            panic!("the first piece is kept");
        };
        assert_eq!(received, 2);
        let Ok(Upload::Kept { upload, .. }) = uploads.add(Some(upload), vec![line(3)], true) else {
            panic!("the second piece is kept");
        };
        let Ok(Upload::Complete(all)) = uploads.add(Some(upload.clone()), vec![line(4)], false) else {
            panic!("the last piece completes it");
        };
        assert_eq!(all, vec![line(1), line(2), line(3), line(4)]);
        assert!(uploads.add(Some(upload), vec![line(5)], false).is_err(), "a finished upload is gone");
    }
}
