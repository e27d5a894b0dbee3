//! `forgectl approvals`, `approve`, `deny`: one inbox for every session's
//! pending tool approvals, answerable from any terminal or script.

use forge_client::ForgeClient;
use forge_proto::ApprovalDecision;
use forge_proto::params::{AnswerParams, ApprovalRulesParams, RecoverParams, ToolResultParams};

use crate::Global;
use crate::connect::daemon;
use crate::exit::Failure;
use crate::output::{approval_prompt, json_line};

pub async fn list(g: &Global, forget: Option<String>) -> Result<(), Failure> {
    let conn = daemon(g).await?;
    if let Some(session) = forget {
        let r = conn
            .client
            .session_approval_rules(ApprovalRulesParams {
                session,
                mode: Some(String::new()),
                clear: true,
                ..Default::default()
            })
            .await?;
        if g.json {
            json_line(&r);
        } else {
            outln!("session {} asks again as [tools.approval] says", r.session_id);
        }
        return Ok(());
    }
    let pending = conn.client.approval_list(()).await?;
    if g.json {
        for p in &pending {
            json_line(p);
        }
        return Ok(());
    }
    if pending.is_empty() {
        outln!("no pending approvals");
    }
    for p in &pending {
        let name = p.session_name.as_deref().map(|n| format!(" ({n})")).unwrap_or_default();
        outln!("session {}{name}, approval {}:", p.session_id, p.approval_id);
        approval_prompt(&p.session_id, &p.calls, true);
    }
    // The rules sessions have of their own ("allow always", a mode).
    let sessions = conn.client.session_list(()).await?;
    let ruled: Vec<_> = sessions.iter().filter(|s| s.approval_mode.is_some() || !s.always_allow.is_empty()).collect();
    if !ruled.is_empty() {
        outln!();
        outln!("session rules (forget them with `forgectl approvals --forget SESSION`):");
        for s in ruled {
            let name = s.name.as_deref().map(|n| format!(" ({n})")).unwrap_or_default();
            let mut rules = Vec::new();
            if let Some(mode) = &s.approval_mode {
                rules.push(format!("mode {mode}"));
            }
            if !s.always_allow.is_empty() {
                rules.push(format!("always allowed: {}", s.always_allow.join(", ")));
            }
            outln!("  session {}{name}: {}", s.id, rules.join("; "));
        }
    }
    Ok(())
}

pub async fn approve(g: &Global, session: &str, all: bool, calls: Vec<u32>, always: bool) -> Result<(), Failure> {
    let conn = daemon(g).await?;
    let (decision, indices) =
        if all { (ApprovalDecision::ApproveAll, None) } else { (ApprovalDecision::ApproveSelected, Some(calls)) };
    let r = conn
        .client
        .approval_answer(AnswerParams { session: session.to_string(), decision, indices, always, ..Default::default() })
        .await?;
    if g.json {
        json_line(&r);
    } else {
        outln!("approved {} call(s), denied {} in session {}", r.approved.len(), r.denied.len(), r.session_id);
        if always {
            outln!(
                "their tools run without asking in this session from now on (`forgectl approvals` lists such rules)"
            );
        }
    }
    Ok(())
}

pub async fn deny(g: &Global, session: &str) -> Result<(), Failure> {
    let conn = daemon(g).await?;
    let r = conn
        .client
        .approval_answer(AnswerParams {
            session: session.to_string(),
            decision: ApprovalDecision::DenyAll,
            ..Default::default()
        })
        .await?;
    if g.json {
        json_line(&r);
    } else {
        outln!("denied {} call(s) in session {}", r.denied.len(), r.session_id);
    }
    Ok(())
}

pub async fn recover(g: &Global, session: &str, resume: bool) -> Result<(), Failure> {
    let conn = daemon(g).await?;
    let action = if resume { forge_proto::RecoverAction::Resume } else { forge_proto::RecoverAction::Discard };
    let r = conn.client.session_recover(RecoverParams { session: session.to_string(), action }).await?;
    if g.json {
        json_line(&r);
    } else if resume {
        outln!(
            "resuming session {}: {} call(s) will run, {} answered as interrupted",
            r.session_id,
            r.rerun.len(),
            r.not_rerun.len()
        );
    } else {
        outln!("discarded {} call(s) in session {}", r.not_rerun.len(), r.session_id);
    }
    Ok(())
}

pub async fn tool_result(
    g: &Global,
    session: &str,
    call_id: String,
    error: bool,
    output: Vec<String>,
) -> Result<(), Failure> {
    let text = if output.len() == 1 && output[0] == "-" {
        let mut t = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut t)
            .map_err(|e| Failure::new(2, "invalid_input", format!("cannot read stdin: {e}")))?;
        t
    } else {
        output.join(" ")
    };
    let conn = daemon(g).await?;
    let r = conn
        .client
        .session_tool_result(ToolResultParams { session: session.to_string(), call_id, output: text, is_error: error })
        .await?;
    if g.json {
        json_line(&r);
    } else if r.remaining.is_empty() {
        outln!("result recorded; the model continues");
    } else {
        outln!("result recorded; still waiting for: {}", r.remaining.join(", "));
    }
    Ok(())
}
