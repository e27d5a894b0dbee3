//! The blob store keeps what change records refer to, and lets go of the
//! rest when the store is opened again.

use forge_core::config::Durability;
use forge_core::journal::{JournalWriter, StoreOp, WriteBatch};
use forge_core::store::Store;

#[tokio::test]
async fn content_no_record_refers_to_is_dropped_when_the_store_opens() {
    let home = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let db = home.path().join("forge.db");
    let store = Store::open(&db, Durability::Process).await.unwrap_or_else(|e| panic!("{e}"));
    let (writer, thread) = JournalWriter::spawn(&db, Durability::Process).unwrap_or_else(|e| panic!("{e}"));
    let ops = vec![
        StoreOp::PutBlob { hash: "kept".into(), data: b"before a change".to_vec() },
        StoreOp::PutBlob { hash: "scanned".into(), data: b"a file no command changed".to_vec() },
        StoreOp::BeginChange {
            session_id: "s".into(),
            node_id: "n".into(),
            call_id: "c".into(),
            path: "/p/a.txt".into(),
            before: Some(("kept".into(), 0o644)),
            created_ms: 1,
        },
    ];
    writer.write(WriteBatch { ops }).await.unwrap_or_else(|e| panic!("{e}"));
    drop(writer);
    let _ = tokio::task::spawn_blocking(move || thread.join()).await;
    assert!(store.blob("scanned").await.ok().flatten().is_some());
    store.close().await;

    let store = Store::open(&db, Durability::Process).await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(store.blob("kept").await.ok().flatten().as_deref(), Some(&b"before a change"[..]));
    assert_eq!(store.blob("scanned").await.ok().flatten(), None, "nothing refers to it");
    store.close().await;
}
