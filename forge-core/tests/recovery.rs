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
    let db = home.join("forge.db");
    let store = Store::open(&db, Durability::Process).await.unwrap_or_else(|e| panic!("{e}"));
    let (writer, thread) = JournalWriter::spawn(&db, Durability::Process).unwrap_or_else(|e| panic!("{e}"));
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
    event(
        EventKind::SessionCreated {
            name: None,
            cwd: "/tmp".into(),
            provider: "claude".into(),
            model: "m".into(),
            sampling: Default::default(),
        },
        &mut ops,
    );
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
        EventKind::TurnStarted {
            message_id: format!("{id}-u"),
            text: "question".into(),
            provider: "claude".into(),
            model: "m".into(),
            continued: false,
            images: Vec::new(),
        },
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
            reasoning: Vec::new(),
            sealed_ms: 2,
        });
    }
    writer.write(WriteBatch { ops }).await.unwrap_or_else(|e| panic!("{e}"));
    drop(writer);
    let _ = tokio::task::spawn_blocking(move || thread.join()).await;
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
            assert_eq!(h[1].meta.recovered, Some(badge), "{id}");
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
    let last: SessionEvent =
        serde_json::from_str(bodies.last().map(String::as_str).unwrap_or("{}")).unwrap_or_else(|e| panic!("{e}"));
    match last.kind {
        EventKind::TurnFinished { status, recovered, .. } => {
            assert_eq!(status, MessageStatus::Interrupted);
            assert_eq!(recovered, Some(RecoveryBadge::Incomplete));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(last.client, Some(ClientRef::daemon()));
    let seqs: Vec<u64> =
        bodies.iter().filter_map(|b| serde_json::from_str::<SessionEvent>(b).ok()).map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>());
    engine.shutdown().await;
}

#[tokio::test]
async fn a_turn_stopped_in_its_tools_waits_for_a_decision_and_never_reruns_an_interrupted_side_effect() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let id = "tools";
    let db = dir.path().join("forge.db");
    let store = Store::open(&db, Durability::Process).await.unwrap_or_else(|e| panic!("{e}"));
    let (writer, thread) = JournalWriter::spawn(&db, Durability::Process).unwrap_or_else(|e| panic!("{e}"));
    let ev = |seq: u64, kind: EventKind| {
        let e = SessionEvent { session_id: id.into(), seq, ts_ms: 1, client: None, kind };
        let name = match &e.kind {
            EventKind::TurnStarted { .. } => "turn_started",
            EventKind::ToolRunning { .. } => "tool_running",
            _ => "session_created",
        };
        StoreOp::AppendEvent {
            session_id: id.into(),
            seq,
            ts_ms: 1,
            kind: name,
            body: serde_json::to_string(&e).unwrap_or_default().into(),
        }
    };
    let call = |c: &str, name: &str, args: &str| forge_proto::ToolCallRecord {
        id: c.into(),
        name: name.into(),
        arguments: args.into(),
    };
    let ops = vec![
        StoreOp::CreateSession {
            id: id.into(),
            name: None,
            cwd: dir.path().display().to_string(),
            provider: "claude".into(),
            model: "m".into(),
            created_ms: 1,
        },
        ev(
            1,
            EventKind::SessionCreated {
                name: None,
                cwd: "/tmp".into(),
                provider: "claude".into(),
                model: "m".into(),
                sampling: Default::default(),
            },
        ),
        StoreOp::InsertNode {
            id: "u".into(),
            session_id: id.into(),
            parent_id: None,
            role: Role::User,
            text: "q".into(),
            status: MessageStatus::Complete,
            created_ms: 1,
            meta: Default::default(),
        },
        ev(
            2,
            EventKind::TurnStarted {
                message_id: "u".into(),
                text: "q".into(),
                provider: "claude".into(),
                model: "m".into(),
                continued: false,
                images: Vec::new(),
            },
        ),
        StoreOp::InsertNode {
            id: "a".into(),
            session_id: id.into(),
            parent_id: Some("u".into()),
            role: Role::Assistant,
            text: "working".into(),
            status: MessageStatus::Complete,
            created_ms: 1,
            meta: forge_core::store::rows::NodeMeta {
                message: forge_proto::MessageMeta {
                    tool_calls: vec![
                        call("c1", "write_file", r#"{"path":"x.txt","content":"1"}"#),
                        call("c2", "current_date", "{}"),
                    ],
                    ..Default::default()
                },
                ..Default::default()
            },
        },
        StoreOp::SetHead { session_id: id.into(), head_id: Some("a".into()) },
        // c1 was running when the daemon died; c2 had not started.
        ev(3, EventKind::ToolRunning { call_id: "c1".into(), name: "write_file".into() }),
    ];
    writer.write(WriteBatch { ops }).await.unwrap_or_else(|e| panic!("{e}"));
    drop(writer);
    let _ = tokio::task::spawn_blocking(move || thread.join()).await;
    store.close().await;

    for _ in 0..2 {
        let engine = Engine::open(EngineOptions { home: dir.path().to_path_buf(), config: ForgeConfig::default() })
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let info = engine.show(id).await.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(info.state, forge_proto::OperationStateKind::ToolRecovery);
        assert_eq!(info.waiting_on, "recovery_decision");
        let (_, bodies) = engine.events(id, 0, 100).await.unwrap_or_else(|e| panic!("{e}"));
        let notices = bodies.iter().filter(|b| b.contains("\"kind\":\"tool_recovery\"")).count();
        assert_eq!(notices, 1, "announced once, however often it restarts");
        engine.shutdown().await;
    }

    let engine = Engine::open(EngineOptions { home: dir.path().to_path_buf(), config: ForgeConfig::default() })
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let params = forge_proto::params::RecoverParams { session: id.into(), action: forge_proto::RecoverAction::Resume };
    let r = engine
        .request(forge_proto::methods::SessionRequest::Recover(params), ClientRef::daemon())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let r: forge_proto::RecoverResult = serde_json::from_value(r).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(r.rerun, vec!["c2".to_string()]);
    assert_eq!(r.not_rerun, vec!["c1".to_string()], "the interrupted write is not run again");
    let mut h = Vec::new();
    for _ in 0..200 {
        h = engine.history(id).await.unwrap_or_else(|e| panic!("{e}")).messages;
        if h.iter().filter(|m| m.role == Role::Tool).count() == 2 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let c1 = h
        .iter()
        .find(|m| m.meta.tool_result.as_ref().is_some_and(|t| t.call_id == "c1"))
        .unwrap_or_else(|| panic!("{h:?}"));
    assert!(c1.text.contains("not run again"), "{}", c1.text);
    let c2 = h
        .iter()
        .find(|m| m.meta.tool_result.as_ref().is_some_and(|t| t.call_id == "c2"))
        .unwrap_or_else(|| panic!("{h:?}"));
    assert!(!c2.meta.tool_result.as_ref().is_some_and(|t| t.is_error), "current_date ran: {}", c2.text);
    assert!(!dir.path().join("x.txt").exists());
    engine.shutdown().await;
}
