//! Recovery of every stream journal state, exactly once, through the
//! public engine API: the journal is prepared as a crash would leave it,
//! then the engine opens the store.

use std::sync::Arc;

use forge_core::config::{Durability, ForgeConfig};
use forge_core::journal::{JournalWriter, StoreOp, WriteBatch};
use forge_core::store::Store;
use forge_core::{Engine, EngineOptions};
use forge_proto::{ClientRef, EventKind, MessageStatus, RecoveryBadge, Role, SessionEvent};

/// Writes a session whose turn streamed `text` in deltas, with its stream
/// journal entry left `open` or sealed with `seal`.
async fn crashed_session(home: &std::path::Path, id: &str, text: &[&str], seal: Option<MessageStatus>) {
    std::fs::create_dir_all(home).unwrap_or_else(|e| panic!("{e}"));
    let (store, conn) = Store::open(&home.join("forge.db"), Durability::Process).await.unwrap_or_else(|e| panic!("{e}"));
    let (writer, task) = JournalWriter::spawn(conn);
    let mut ops = vec![StoreOp::CreateSession {
        id: id.into(),
        name: Some(id.into()),
        cwd: "/tmp".into(),
        provider: "claude".into(),
        model: "m".into(),
        created_ms: 1,
    }];
    let mut seq = 0;
    let mut event = |kind: EventKind, ops: &mut Vec<StoreOp>| {
        seq += 1;
        let ev = SessionEvent { session_id: id.into(), seq, ts_ms: 1, client: None, kind };
        let name = match &ev.kind {
            EventKind::TurnStarted { .. } => "turn_started",
            EventKind::TextDelta { .. } => "text_delta",
            _ => "session_created",
        };
        let body: Arc<str> = serde_json::to_string(&ev).unwrap_or_default().into();
        ops.push(StoreOp::AppendEvent { session_id: id.into(), seq, ts_ms: 1, kind: name, body });
        seq
    };
    event(EventKind::SessionCreated { name: None, cwd: "/tmp".into(), provider: "claude".into(), model: "m".into() }, &mut ops);
    ops.push(StoreOp::InsertNode {
        id: format!("{id}-u"),
        session_id: id.into(),
        parent_id: None,
        role: Role::User,
        text: "question".into(),
        status: MessageStatus::Complete,
        created_ms: 1,
        meta: Default::default(),
    });
    ops.push(StoreOp::SetHead { session_id: id.into(), head_id: Some(format!("{id}-u")) });
    let first_seq = event(
        EventKind::TurnStarted { message_id: format!("{id}-u"), text: "question".into(), provider: "claude".into(), model: "m".into() },
        &mut ops,
    );
    ops.push(StoreOp::StreamBegin {
        stream_id: format!("{id}-t"),
        session_id: id.into(),
        message_id: format!("{id}-u"),
        provider: "claude".into(),
        model: "m".into(),
        first_seq,
        created_ms: 1,
    });
    for t in text {
        event(EventKind::TextDelta { text: (*t).into() }, &mut ops);
    }
    if let Some(outcome) = seal {
        ops.push(StoreOp::StreamSeal {
            stream_id: format!("{id}-t"),
            outcome,
            error: (outcome == MessageStatus::Error).then(|| "overloaded".to_string()),
            error_kind: None,
            stop_reason: None,
            usage: None,
            sealed_ms: 2,
        });
    }
    writer.write(WriteBatch { ops }).await.unwrap_or_else(|e| panic!("{e}"));
    drop(writer);
    let _ = task.await;
    store.close().await;
}

async fn history_after_open(home: &std::path::Path, id: &str) -> Vec<forge_proto::HistoryMessage> {
    let engine = Engine::open(EngineOptions { home: home.to_path_buf(), config: ForgeConfig::default() })
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let h = engine.history(id).await.unwrap_or_else(|e| panic!("{e}"));
    engine.shutdown().await;
    h.messages
}

#[tokio::test]
async fn each_journal_state_is_recovered_with_its_badge_exactly_once() {
    let cases = [
        ("open", None, MessageStatus::Interrupted, RecoveryBadge::Incomplete),
        ("sealedok", Some(MessageStatus::Complete), MessageStatus::Complete, RecoveryBadge::Complete),
        ("sealederr", Some(MessageStatus::Error), MessageStatus::Error, RecoveryBadge::Errored),
    ];
    for (id, seal, status, badge) in cases {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        crashed_session(dir.path(), id, &["Hel", "lo ", "wörld"], seal).await;
        for round in 0..3 {
            let h = history_after_open(dir.path(), id).await;
            assert_eq!(h.len(), 2, "{id} round {round}: exactly one recovered message: {h:?}");
            assert_eq!(h[1].role, Role::Assistant);
            assert_eq!(h[1].text, "Hello wörld", "{id}: the persisted deltas, in order");
            assert_eq!(h[1].status, status, "{id}");
            assert_eq!(h[1].recovered, Some(badge), "{id}");
        }
    }
}

#[tokio::test]
async fn a_recovered_answer_is_context_for_the_next_turn_marked_as_interrupted() {
    // The next request's context is checked end to end in the integration
    // tests; here: the recovered turn is closed by a `turn_finished`
    // carrying the badge, attributed to the daemon.
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    crashed_session(dir.path(), "ctx", &["partial"], None).await;
    let engine = Engine::open(EngineOptions { home: dir.path().to_path_buf(), config: ForgeConfig::default() })
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let (_, bodies) = engine.events("ctx", 0, 100).await.unwrap_or_else(|e| panic!("{e}"));
    let last: SessionEvent = serde_json::from_str(bodies.last().map(String::as_str).unwrap_or("{}")).unwrap_or_else(|e| panic!("{e}"));
    match last.kind {
        EventKind::TurnFinished { status, recovered, .. } => {
            assert_eq!(status, MessageStatus::Interrupted);
            assert_eq!(recovered, Some(RecoveryBadge::Incomplete));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(last.client, Some(ClientRef::daemon()));
    let seqs: Vec<u64> = bodies
        .iter()
        .filter_map(|b| serde_json::from_str::<SessionEvent>(b).ok())
        .map(|e| e.seq)
        .collect();
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>());
    engine.shutdown().await;
}

#[tokio::test]
async fn a_turn_stopped_while_its_tools_ran_ends_with_interrupted_results_not_reruns() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let id = "tools";
    let (store, conn) = Store::open(&dir.path().join("forge.db"), Durability::Process).await.unwrap_or_else(|e| panic!("{e}"));
    let (writer, task) = JournalWriter::spawn(conn);
    let ev = |seq: u64, kind: EventKind| {
        let e = SessionEvent { session_id: id.into(), seq, ts_ms: 1, client: None, kind };
        let name = match &e.kind {
            EventKind::TurnStarted { .. } => "turn_started",
            EventKind::ToolRunning { .. } => "tool_running",
            _ => "session_created",
        };
        StoreOp::AppendEvent { session_id: id.into(), seq, ts_ms: 1, kind: name, body: serde_json::to_string(&e).unwrap_or_default().into() }
    };
    let call = |c: &str| forge_proto::ToolCallRecord { id: c.into(), name: "read_file".into(), arguments: "{}".into() };
    let ops = vec![
        StoreOp::CreateSession { id: id.into(), name: None, cwd: "/tmp".into(), provider: "claude".into(), model: "m".into(), created_ms: 1 },
        ev(1, EventKind::SessionCreated { name: None, cwd: "/tmp".into(), provider: "claude".into(), model: "m".into() }),
        StoreOp::InsertNode { id: "u".into(), session_id: id.into(), parent_id: None, role: Role::User, text: "q".into(), status: MessageStatus::Complete, created_ms: 1, meta: Default::default() },
        ev(2, EventKind::TurnStarted { message_id: "u".into(), text: "q".into(), provider: "claude".into(), model: "m".into() }),
        StoreOp::InsertNode {
            id: "a".into(),
            session_id: id.into(),
            parent_id: Some("u".into()),
            role: Role::Assistant,
            text: "reading".into(),
            status: MessageStatus::Complete,
            created_ms: 1,
            meta: forge_core::store::rows::NodeMeta { tool_calls: vec![call("c1"), call("c2")], ..Default::default() },
        },
        StoreOp::SetHead { session_id: id.into(), head_id: Some("a".into()) },
        ev(3, EventKind::ToolRunning { call_id: "c1".into(), name: "read_file".into() }),
    ];
    writer.write(WriteBatch { ops }).await.unwrap_or_else(|e| panic!("{e}"));
    drop(writer);
    let _ = task.await;
    store.close().await;

    for _ in 0..2 {
        let h = history_after_open(dir.path(), id).await;
        let roles: Vec<Role> = h.iter().map(|m| m.role).collect();
        assert_eq!(roles, vec![Role::User, Role::Assistant, Role::Tool, Role::Tool], "once, however often it restarts");
        for m in &h[2..] {
            let r = m.tool_result.clone().unwrap_or_else(|| panic!("a tool result"));
            assert!(r.is_error && m.text.contains("not run again"), "{}", m.text);
        }
    }
}
