use super::*;
use forge_proto::{ClientKind, ClientRef};

fn ev(seq: u64, kind: EventKind) -> SessionEvent {
    SessionEvent { session_id: "s".into(), seq, ts_ms: 0, client: None, kind }
}

#[test]
fn a_turn_with_a_tool_call_becomes_user_answer_and_tool_items() {
    let mut t = Transcript::default();
    let events = [
        EventKind::TurnStarted {
            message_id: "m".into(),
            text: "hi".into(),
            provider: "claude".into(),
            model: "m1".into(),
            continued: false,
            images: Vec::new(),
        },
        EventKind::TextDelta { text: "Let me ".into() },
        EventKind::TextDelta { text: "look.".into() },
        EventKind::ToolCallStarted { index: 0, call_id: "c1".into(), name: "read_file".into() },
        EventKind::ToolCallArgs { index: 0, fragment: "{\"path\":".into() },
        EventKind::ToolCallArgs { index: 0, fragment: "\"a\"}".into() },
        EventKind::TurnFinished {
            message_id: "m".into(),
            assistant_id: None,
            status: MessageStatus::Complete,
            stop_reason: None,
            usage: None,
            error: None,
            error_kind: None,
            recovered: None,
        },
    ];
    for (i, k) in events.into_iter().enumerate() {
        t.apply(&ev(i as u64 + 1, k));
    }
    assert!(matches!(&t.items[0], DisplayItem::User { text, .. } if text == "hi"));
    assert!(
        matches!(&t.items[1], DisplayItem::Assistant(a) if a.text == "Let me look." && a.status == Some(MessageStatus::Complete))
    );
    assert!(matches!(&t.items[2], DisplayItem::Tool(c) if c.args == "{\"path\":\"a\"}"));
    assert_eq!(t.fold.state, Some(forge_proto::OperationStateKind::Idle));
    // A replayed (older) event changes nothing.
    t.apply(&ev(2, EventKind::TextDelta { text: "again".into() }));
    assert!(matches!(&t.items[1], DisplayItem::Assistant(a) if a.text == "Let me look."));
}

#[test]
fn an_approval_appears_and_disappears_when_anyone_answers() {
    let mut t = Transcript::default();
    let call = ApprovalCall {
        call_id: "c".into(),
        name: "write_file".into(),
        arguments: "{}".into(),
        risk: "medium".into(),
        summary: "write x".into(),
    };
    t.apply(&ev(1, EventKind::ApprovalRequested { approval_id: "a1".into(), calls: vec![call], helper: None }));
    assert_eq!(t.approval.as_ref().map(|a| a.picked.clone()), Some(vec![true]));
    let mut resolved =
        ev(2, EventKind::ApprovalResolved { approval_id: "a1".into(), approved: vec!["c".into()], denied: vec![] });
    resolved.client = Some(ClientRef { id: 3, name: "forgectl".into(), kind: ClientKind::Cli });
    t.apply(&resolved);
    assert!(t.approval.is_none());
    assert!(
        matches!(t.items.last(), Some(DisplayItem::Notice { text, .. }) if text == "tool calls approved by forgectl")
    );
}
