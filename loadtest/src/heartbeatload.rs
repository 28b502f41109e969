//! `heartbeatload`: pushes heartbeats to an orchestrator's API as N pushing endpoints would:
//! endpoint `PREFIX1` .. `PREFIXN`, each once per `--every`, spread evenly over the period,
//! over `--connections` kept HTTP/1.1 connections, for `--seconds`. Prints one JSON line:
//! heartbeats sent, answered 200, other answers, the answer time p50/p99, and when the last
//! heartbeat was answered 200 (Unix nanoseconds: where a detection measurement starts). Sends only to
//! the API address given (a loopback address in the bench).

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::Parser;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

/// Arguments.
#[derive(Parser)]
struct Args {
    /// The API, e.g. 127.0.0.1:18090 (loopback only).
    #[arg(long)]
    api: SocketAddr,
    /// Endpoint names are PREFIX1 .. PREFIXN.
    #[arg(long, default_value = "e")]
    prefix: String,
    /// Pushing endpoints.
    #[arg(long)]
    count: usize,
    /// How often each endpoint pushes.
    #[arg(long, default_value = "1s", value_parser = humantime::parse_duration)]
    every: Duration,
    /// How long to push.
    #[arg(long)]
    seconds: u64,
    /// Kept connections the heartbeats are spread over.
    #[arg(long, default_value_t = 16)]
    connections: usize,
    /// File holding the bearer token.
    #[arg(long)]
    token_file: std::path::PathBuf,
}

/// What one connection saw.
#[derive(Default)]
struct Tally {
    sent: u64,
    ok: u64,
    other: u64,
    micros: Vec<u32>,
    /// When the last heartbeat was answered 200, Unix nanoseconds.
    last_ok_ns: u128,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    if !args.api.ip().is_loopback() {
        bail!("--api must be a loopback address");
    }
    let token = std::fs::read_to_string(&args.token_file)
        .with_context(|| args.token_file.display().to_string())?
        .trim()
        .to_owned();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let tally = runtime.block_on(push_all(&args, &token))?;
    let mut micros = tally.micros;
    micros.sort_unstable();
    let at = |q: f64| {
        micros
            .get(((micros.len() as f64 - 1.0) * q) as usize)
            .copied()
    };
    println!(
        "{}",
        serde_json::json!({
            "count": args.count, "every_ms": args.every.as_millis() as u64,
            "seconds": args.seconds, "sent": tally.sent, "ok": tally.ok, "other": tally.other,
            "answer_p50_us": at(0.5), "answer_p99_us": at(0.99),
            "last_ok_unix_ns": tally.last_ok_ns.to_string(),
        })
    );
    Ok(())
}

async fn push_all(args: &Args, token: &str) -> anyhow::Result<Tally> {
    let start = Instant::now();
    let end = start + Duration::from_secs(args.seconds);
    let mut tasks = tokio::task::JoinSet::new();
    for c in 0..args.connections {
        // Connection c pushes for endpoints c+1, c+1+C, ...
        let names: Vec<String> = (c..args.count)
            .step_by(args.connections)
            .map(|i| format!("{}{}", args.prefix, i + 1))
            .collect();
        let (api, every, token) = (args.api, args.every, token.to_owned());
        tasks.spawn(async move { push(api, names, every, token, start, end).await });
    }
    let mut total = Tally::default();
    while let Some(done) = tasks.join_next().await {
        let t = done??;
        total.sent += t.sent;
        total.ok += t.ok;
        total.other += t.other;
        total.micros.extend(t.micros);
        total.last_ok_ns = total.last_ok_ns.max(t.last_ok_ns);
    }
    Ok(total)
}

/// One connection's share: each name once per `every`, evenly spaced, until `end`.
async fn push(
    api: SocketAddr,
    names: Vec<String>,
    every: Duration,
    token: String,
    start: Instant,
    end: Instant,
) -> anyhow::Result<Tally> {
    let mut tally = Tally::default();
    if names.is_empty() {
        return Ok(tally);
    }
    let mut stream = TcpStream::connect(api).await?;
    stream.set_nodelay(true)?;
    let requests: Vec<Vec<u8>> = names
        .iter()
        .map(|n| {
            format!(
                "POST /v1/heartbeat/{n} HTTP/1.1\r\nHost: {api}\r\nAuthorization: Bearer {token}\r\nContent-Length: 0\r\n\r\n"
            )
            .into_bytes()
        })
        .collect();
    let step = every / names.len() as u32;
    let mut buf = Vec::with_capacity(512);
    let mut slot = 0u64;
    loop {
        let due = start + step * slot as u32;
        if due >= end {
            return Ok(tally);
        }
        tokio::time::sleep_until(due).await;
        let sent = Instant::now();
        stream
            .write_all(&requests[slot as usize % requests.len()])
            .await?;
        tally.sent += 1;
        let code = read_answer(&mut stream, &mut buf).await?;
        tally
            .micros
            .push(sent.elapsed().as_micros().min(u32::MAX as u128) as u32);
        if code == 200 {
            tally.ok += 1;
            tally.last_ok_ns = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default()
                .as_nanos();
        } else {
            tally.other += 1;
        }
        slot += 1;
    }
}

/// Reads one response (head and `Content-Length` body); its status code.
async fn read_answer(stream: &mut TcpStream, buf: &mut Vec<u8>) -> anyhow::Result<u16> {
    buf.clear();
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = std::str::from_utf8(&buf[..end])?.to_ascii_lowercase();
            let code = head
                .split_whitespace()
                .nth(1)
                .and_then(|c| c.parse().ok())
                .context("a status line")?;
            let length: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0);
            while buf.len() < end + 4 + length {
                if stream.read_buf(buf).await? == 0 {
                    bail!("the API closed the connection");
                }
            }
            return Ok(code);
        }
        if stream.read_buf(buf).await? == 0 {
            bail!("the API closed the connection");
        }
    }
}
