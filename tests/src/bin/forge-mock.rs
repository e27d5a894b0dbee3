//! `forge-mock`: the mock LLM provider as a standalone server, for the
//! demo, the benchmark and trying clients by hand. Prints its base URLs and
//! serves until killed.

use clap::Parser;
use forge_tests::mock::{DIRECTIVES, MockOptions, MockServer};

#[derive(Parser)]
#[command(
    name = "forge-mock",
    about = "Mock LLM provider (Anthropic Messages, OpenAI Chat and Responses, Gemini; all SSE) on loopback: try Forge without a key",
    after_help = DIRECTIVES
)]
struct Args {
    /// Address to listen on (loopback only)
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: String,
    /// Delay between streamed chunks, in ms (a message can override it with mock:delay=MS)
    #[arg(long, default_value_t = 0)]
    delay_ms: u64,
    /// Append the time (Unix ns) of each reply's first text chunk to FILE
    #[arg(long, value_name = "FILE")]
    first_byte_log: Option<std::path::PathBuf>,
    /// Append each request Forge sends (its path and JSON body) to FILE,
    /// one line each: see what a steer, a schema or a command put in it
    #[arg(long, value_name = "FILE")]
    request_log: Option<std::path::PathBuf>,
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let server = MockServer::start_on(
        &args.listen,
        MockOptions {
            default_delay_ms: args.delay_ms,
            first_byte_log: args.first_byte_log,
            request_log: args.request_log,
        },
    )
    .await?;
    println!("forge-mock listening on http://{}", server.addr);
    println!("ANTHROPIC_BASE_URL={}", server.anthropic_url());
    println!("OPENAI_BASE_URL={}", server.openai_url());
    println!("GEMINI_BASE_URL={}", server.gemini_url());
    std::future::pending::<()>().await;
    Ok(())
}
