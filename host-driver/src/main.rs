//! `podlink`: decode and encode podlink wire formats.
//!
//! ```text
//! podlink decode KIND [HEX]     fields as one JSON object per item
//! podlink encode KIND [JSON]    lowercase hex per item
//! podlink kinds                 list the kinds
//! ```
//! With the last argument omitted, each reads one item per line from stdin and writes one
//! result per line. Bad input: a one-line error on stderr, nothing on stdout for that item,
//! exit status 2 (the other lines still go through).

use clap::{Parser, Subcommand};
use podlink_host::cli::{self, CliResult, KINDS};
use std::io::{BufRead, Read, Write};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "podlink",
    version,
    about = "podlink wire-format tool: decode and encode TL, DL and Ethernet-profile formats"
)]
struct Args {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Decode hex bytes of KIND into a JSON object of its fields.
    Decode {
        /// The format (see `podlink kinds`).
        kind: String,
        /// Hex bytes; omitted: one item per line from stdin.
        hex: Option<String>,
    },
    /// Encode a JSON object of fields of KIND into lowercase hex.
    Encode {
        /// The format (see `podlink kinds`).
        kind: String,
        /// A JSON object; omitted: one object per line from stdin.
        json: Option<String>,
    },
    /// List the kinds this tool knows.
    Kinds,
    /// A short walk-through: encode and decode one item of each layer.
    Demo,
}

fn decode_one(kind: &str, hex: &str) -> CliResult<String> {
    let bytes = cli::parse_hex(hex)?;
    Ok(serde_json::Value::Object(cli::decode(kind, &bytes)?).to_string())
}

fn encode_one(kind: &str, json: &str) -> CliResult<String> {
    let m = cli::parse_object(json)?;
    Ok(cli::to_hex(&cli::encode(kind, &m)?))
}

/// Longest stdin line accepted (bytes): larger lines are refused, not buffered.
const MAX_LINE: usize = 4 * 1024 * 1024;

/// Discard input up to and including the next newline, without buffering it.
fn skip_line(rd: &mut impl BufRead) {
    loop {
        let (done, used) = match rd.fill_buf() {
            Ok([]) | Err(_) => return,
            Ok(b) => match b.iter().position(|&c| c == b'\n') {
                Some(i) => (true, i + 1),
                None => (false, b.len()),
            },
        };
        rd.consume(used);
        if done {
            return;
        }
    }
}

/// Print one result: the value on stdout, or a one-line error on stderr. True on error.
fn report(out: &mut impl Write, r: CliResult<String>, line: Option<usize>) -> bool {
    match r {
        Ok(s) => {
            let _ = writeln!(out, "{s}");
            false
        }
        Err(e) => {
            match line {
                Some(n) => eprintln!("podlink: line {n}: {e}"),
                None => eprintln!("podlink: {e}"),
            }
            true
        }
    }
}

fn run(kind: &str, arg: Option<String>, f: fn(&str, &str) -> CliResult<String>) -> ExitCode {
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let mut failed = false;
    match arg {
        Some(a) => failed |= report(&mut out, f(kind, &a), None),
        None => {
            let stdin = std::io::stdin();
            let mut rd = stdin.lock();
            let mut buf = Vec::new();
            let mut n = 0usize;
            loop {
                buf.clear();
                n += 1;
                let mut limited = (&mut rd).take(MAX_LINE as u64 + 1);
                match limited.read_until(b'\n', &mut buf) {
                    Ok(0) => break,
                    Ok(_) => {}
                    Err(e) => {
                        eprintln!("podlink: reading stdin: {e}");
                        failed = true;
                        break;
                    }
                }
                if buf.len() > MAX_LINE && buf.last() != Some(&b'\n') {
                    eprintln!("podlink: line {n}: longer than {MAX_LINE} bytes");
                    failed = true;
                    skip_line(&mut rd);
                    continue;
                }
                let line = match std::str::from_utf8(&buf) {
                    Ok(s) => s.trim(),
                    Err(_) => {
                        eprintln!("podlink: line {n}: not UTF-8");
                        failed = true;
                        continue;
                    }
                };
                if line.is_empty() {
                    continue;
                }
                failed |= report(&mut out, f(kind, line), Some(n));
            }
        }
    }
    let _ = out.flush();
    if failed {
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    }
}

/// Encode then decode one example of each kind of the walk-through, printing both.
fn demo() -> ExitCode {
    let examples: &[(&str, &str)] = &[
        (
            "tl_uncompressed_request",
            r#"{"cmd":3,"vchan":1,"tag":42,"len":15,"addr":1048592,"srcaccid":3,"dstaccid":9}"#,
        ),
        (
            "tl_uncompressed_response",
            r#"{"vchan":1,"tag":42,"len":0,"status":0,"last":1,"srcaccid":9,"dstaccid":3}"#,
        ),
        (
            "tl_flow_control_nop",
            r#"{"req_cmd":4,"rsp_cmd":4,"req_data":16,"rsp_data":16}"#,
        ),
        (
            "dl_explicit_flit_header",
            r#"{"op":0,"payload":1,"flit_seq_no":511}"#,
        ),
        (
            "dl_command_flit_header",
            r#"{"op":2,"payload":0,"ack_req_seq":291,"flit_seq_lo":3}"#,
        ),
        ("crc32", r#"{"input_hex":"313233343536373839"}"#),
        (
            "tl_flit",
            r#"{"items":[{"kind":"tl_uncompressed_request","cmd":3,"tag":42,"len":15,"addr":16,"srcaccid":3,"dstaccid":9},{"kind":"credits","req_cmd":4,"rsp_cmd":4,"req_data":16,"rsp_data":16}]}"#,
        ),
        (
            "dl_flit",
            r#"{"seq":1,"tl_flits":["10c015000f0000000000000020018120010410100000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"],"messages":[{"kind":"dl_msg_device_id","valid":1,"type":1,"id":3}]}"#,
        ),
        (
            "eth_frame",
            r#"{"dst":9,"src":3,"op":"data","vc":1,"partition":1,"psn":1,"ack_psn":0,"tl_flits":["10c015000f0000000000000020018120010410100000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"]}"#,
        ),
    ];
    println!("podlink demo: each item encoded to wire bytes, then decoded back\n");
    for (kind, json) in examples {
        let result = encode_one(kind, json).and_then(|hex| {
            let back = if *kind == "crc32" {
                hex.clone()
            } else {
                decode_one(kind, &hex)?
            };
            Ok((hex, back))
        });
        match result {
            Ok((hex, back)) => {
                println!("{kind}");
                println!("  fields  {json}");
                if hex.len() > 96 {
                    println!("  encoded {}... ({} bytes)", &hex[..96], hex.len() / 2);
                } else {
                    println!("  encoded {hex}");
                }
                println!("  decoded {back}\n");
            }
            Err(e) => {
                eprintln!("podlink demo: {kind}: {e}");
                return ExitCode::from(1);
            }
        }
    }
    println!("Try: podlink kinds | podlink decode KIND HEX | podlink encode KIND JSON");
    ExitCode::SUCCESS
}

fn main() -> ExitCode {
    let args = Args::parse();
    match args.cmd {
        Cmd::Decode { kind, hex } => run(&kind, hex, decode_one),
        Cmd::Encode { kind, json } => run(&kind, json, encode_one),
        Cmd::Demo => demo(),
        Cmd::Kinds => {
            for k in KINDS {
                println!("{:<48} {}", k.name, k.about);
            }
            ExitCode::SUCCESS
        }
    }
}
