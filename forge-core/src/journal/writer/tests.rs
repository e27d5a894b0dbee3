//! The writer's unit tests: inline commits, the delta log, groups, failures
//! and a database moved under the daemon.

use super::*;
use crate::journal::StoreOp;
use crate::store::Store;

fn create(id: &str) -> WriteBatch {
    WriteBatch {
        ops: vec![StoreOp::CreateSession {
            id: id.into(),
            name: None,
            cwd: "/tmp".into(),
            provider: "claude".into(),
            model: "m".into(),
            created_ms: 1,
        }],
    }
}

fn event(id: &str, seq: u64) -> WriteBatch {
    WriteBatch {
        ops: vec![StoreOp::AppendEvent {
            session_id: id.into(),
            seq,
            ts_ms: 1,
            kind: "text_delta",
            body: Arc::from(format!("{{\"seq\":{seq}}}")),
        }],
    }
}

/// Commits inline once the writer thread has let go of the connection
/// (it still holds it for a moment after sending an ack).
async fn inline(writer: &JournalWriter, seq: u64, mut batch: WriteBatch) -> JournalAck {
    for _ in 0..1000 {
        match writer.try_write_inline(seq, batch) {
            Ok(ack) => return ack,
            Err(back) => batch = back,
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    panic!("the writer never became idle")
}

async fn open(durability: Durability) -> (tempfile::TempDir, Store, JournalWriter) {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let db = dir.path().join("forge.db");
    let store = Store::open(&db, durability).await.unwrap_or_else(|e| panic!("{e}"));
    let (writer, _thread) = JournalWriter::spawn(&db, durability).unwrap_or_else(|e| panic!("{e}"));
    (dir, store, writer)
}

#[tokio::test]
async fn a_database_replaced_on_disk_blocks_and_a_reset_writes_it_back_keeping_the_other_file() {
    let (dir, store, writer) = open(Durability::Process).await;
    let db = dir.path().join("forge.db");
    assert!(inline(&writer, 1, create("s")).await.result.is_ok());
    assert!(inline(&writer, 2, event("s", 1)).await.result.is_ok());
    // Someone puts another file where the store was.
    std::fs::rename(&db, dir.path().join("elsewhere.db")).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(&db, b"not ours").unwrap_or_else(|e| panic!("{e}"));
    // Neither path acks into the file that left.
    assert!(writer.try_write_inline(3, event("s", 2)).is_err(), "no inline ack");
    let err = writer.write(event("s", 2)).await.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(err.contains("deleted or replaced"), "{err}");
    assert_eq!(writer.health().health, JournalHealth::Blocked);

    let outcome = writer.reset().await.unwrap_or_else(|e| panic!("{e}"));
    let ResetOutcome::Restored(note) = outcome else { panic!("not restored: {outcome:?}") };
    assert!(note.contains("replaced-"), "{note}");
    let kept: Vec<_> = std::fs::read_dir(dir.path())
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("forge.db.replaced-"))
        .map(|e| std::fs::read(e.path()).unwrap_or_default())
        .collect();
    assert_eq!(kept, vec![b"not ours".to_vec()], "the other file is kept, untouched");
    store.reopen().await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(writer.reset().await, Ok(ResetOutcome::Healthy));
    assert!(writer.write(event("s", 2)).await.is_ok());
    let seqs: Vec<u64> = store.events_after("s", 0, 10).await.unwrap_or_default().iter().map(|e| e.0).collect();
    assert_eq!(seqs, vec![1, 2], "what was acked before, and what came after, in the file at the path");
}

#[tokio::test]
async fn an_idle_writer_commits_inline_and_the_store_has_it_before_the_ack_returns() {
    let (_dir, store, writer) = open(Durability::Process).await;
    let ack = inline(&writer, 7, create("s")).await;
    assert_eq!(ack.seq, 7);
    assert!(ack.result.is_ok());
    assert!(store.session("s").await.unwrap_or_else(|e| panic!("{e}")).is_some());
}

#[tokio::test]
async fn an_inline_event_is_acked_from_the_delta_log_and_readers_see_it_after_sync() {
    let (dir, store, writer) = open(Durability::Process).await;
    writer.write(create("s")).await.unwrap_or_else(|e| panic!("{e}"));
    let ack = inline(&writer, 1, event("s", 1)).await;
    assert!(ack.result.is_ok());
    let log = delta_log::path_for(&dir.path().join("forge.db"));
    assert!(std::fs::metadata(&log).map(|m| m.len()).unwrap_or(0) > 0, "in the delta log when acked");
    writer.sync().await;
    let events = store.events_after("s", 0, 10).await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(events, vec![(1, "{\"seq\":1}".to_string())]);
    // A later batch of the same session lands after it, in order.
    let ack = inline(&writer, 2, event("s", 2)).await;
    assert!(ack.result.is_ok());
    assert!(writer.write(event("s", 3)).await.is_ok());
    let seqs: Vec<u64> = store.events_after("s", 0, 10).await.unwrap_or_default().into_iter().map(|(s, _)| s).collect();
    assert_eq!(seqs, vec![1, 2, 3]);
}

#[tokio::test]
async fn a_batch_the_store_rejects_inline_is_refused_alone_and_the_writer_stays_healthy() {
    let (_dir, store, writer) = open(Durability::Process).await;
    let first = inline(&writer, 1, create("s")).await;
    assert!(first.result.is_ok());
    writer.write(event("s", 1)).await.unwrap_or_else(|e| panic!("{e}"));
    // The same session twice breaks the primary key: a bug, not a bad disk.
    let again = inline(&writer, 2, create("s")).await;
    assert!(matches!(again.result, Err(PersistError::Blocked(ref m)) if m.contains("rejected by the store")));
    assert_eq!(writer.health().health, JournalHealth::Healthy);
    assert!(writer.write(event("s", 2)).await.is_ok());
    assert_eq!(store.events_after("s", 0, 10).await.map(|e| e.len()).unwrap_or(0), 2);
}

#[tokio::test]
async fn events_acked_while_the_store_fails_are_in_it_before_a_reset_says_healthy() {
    let (_dir, store, writer) = open(Durability::Process).await;
    writer.write(create("s")).await.unwrap_or_else(|e| panic!("{e}"));
    assert!(inline(&writer, 1, event("s", 1)).await.result.is_ok());
    // The store fails before the writer moves the event out of the delta log.
    let set_read_only = |on: bool| {
        let core = writer.core.lock().unwrap_or_else(|p| p.into_inner());
        core.conn.pragma_update(None, "query_only", on).unwrap_or_else(|e| panic!("{e}"));
    };
    set_read_only(true);
    writer.sync().await;
    assert_eq!(writer.health().health, JournalHealth::Blocked);
    // Sessions reload from the store the moment they see Healthy.
    let mut health = writer.watch_health();
    let seen = tokio::spawn(async move {
        let _ = health.wait_for(|h| h.health == JournalHealth::Healthy).await;
        store.events_after("s", 0, 10).await.map(|e| e.len()).unwrap_or(0)
    });
    set_read_only(false);
    writer.reset().await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(seen.await.unwrap_or(0), 1);
}

#[tokio::test]
async fn with_power_durability_every_batch_goes_through_the_writer_thread() {
    let (_dir, _store, writer) = open(Durability::Power).await;
    assert!(
        writer.try_write_inline(1, create("s")).is_err(),
        "a commit that fsyncs must not run on a session's thread"
    );
    assert!(writer.write(create("s")).await.is_ok());
}

#[tokio::test]
async fn in_a_group_a_rejected_batch_fails_alone() {
    let (_dir, store, writer) = open(Durability::Process).await;
    writer.write(create("s")).await.unwrap_or_else(|e| panic!("{e}"));
    writer.write(event("s", 1)).await.unwrap_or_else(|e| panic!("{e}"));
    let (tx, mut rx) = mpsc::channel(4);
    // Queued back to back they usually share a transaction (the thread
    // waits a moment after the first); either way only the bad one fails.
    writer.submit(1, event("s", 1), &tx).await;
    writer.submit(2, event("s", 2), &tx).await;
    let mut acks = Vec::new();
    for _ in 0..2 {
        let ack = rx.recv().await.unwrap_or_else(|| panic!("an ack"));
        acks.push((ack.seq, ack.result.is_ok()));
    }
    acks.sort();
    assert_eq!(acks, vec![(1, false), (2, true)]);
    assert_eq!(store.events_after("s", 0, 10).await.map(|e| e.len()).unwrap_or(0), 2);
}

/// `rm forge.db*` under the daemon: what was acknowledged lives only in
/// the files it still holds open. The check written back the database at
/// once (a crash after it loses nothing), and so does closing.
#[tokio::test]
async fn a_deleted_database_is_written_back_by_the_check_and_on_close() {
    let (dir, store, writer) = open(Durability::Process).await;
    let db = dir.path().join("forge.db");
    let wipe = || {
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(super::restore::sibling(&db, suffix));
        }
    };
    assert!(inline(&writer, 1, create("s")).await.result.is_ok());
    assert!(inline(&writer, 2, event("s", 1)).await.result.is_ok());
    wipe();
    assert_eq!(writer.verify().await, Ok(()));
    let health = writer.health();
    assert_eq!(health.health, JournalHealth::Blocked);
    assert!(health.reason.as_deref().is_some_and(|r| r.contains("was written back")), "{health:?}");
    // A fresh reader of the file at the path (as the next start) has it all.
    let fresh = Store::open(&db, Durability::Process).await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(fresh.events_after("s", 0, 10).await.map(|e| e.len()).unwrap_or(0), 1);
    fresh.close().await;
    // The reset that follows has readers reopen, then the journal goes on.
    assert!(matches!(writer.reset().await, Ok(ResetOutcome::Restored(_))));
    store.reopen().await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(writer.reset().await, Ok(ResetOutcome::Healthy));
    assert!(inline(&writer, 3, event("s", 2)).await.result.is_ok());

    // Deleted again, then the daemon stops.
    wipe();
    assert_eq!(writer.close().await, Ok(()));
    let fresh = Store::open(&db, Durability::Process).await.unwrap_or_else(|e| panic!("{e}"));
    let seqs: Vec<u64> = fresh.events_after("s", 0, 10).await.unwrap_or_default().iter().map(|e| e.0).collect();
    assert_eq!(seqs, vec![1, 2]);
}
