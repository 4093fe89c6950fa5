//! DKIM signing-rate probe (not a test): how many messages a second the project's own DKIM
//! signer signs on the threads the sender signs with, beside the `rsa` crate's raw RSA-2048
//! rate and `openssl speed rsa2048` (the reference for the fastest implementation here), all
//! in one run.
//!
//! ```text
//! cargo build --release --example dkim_rate
//! target/release/examples/dkim_rate [--threads N] [--seconds S] [--size BYTES]
//! ```
//!
//! The message is a typical issue's shape: the headers Broadsheet signs and a 7bit body of
//! about 23 KB (`--size`), signed with a freshly generated 2048-bit key. `send_bench` measures
//! the same rate with the server's own key and rendered message, as the limit of a DKIM-on
//! send.

use broadsheet::mail::dkim::signing_threads;

mod support;
use support::signing::{Rates, fresh_key};

/// Headers of the kind an issue carries, then `size` bytes of body in lines of about 76.
fn typical_message(size: usize) -> Vec<u8> {
    let mut message = String::from(
        "From: \"Bench\" <editor@bench.example>\r\n\
         To: reader99999@example.net\r\n\
         Subject: Bench issue\r\n\
         Date: Thu, 26 Nov 2026 19:00:00 +0000\r\n\
         Message-ID: <issue-1-123456@bench.example>\r\n\
         MIME-Version: 1.0\r\n\
         Content-Type: text/html; charset=utf-8\r\n\
         Content-Transfer-Encoding: 7bit\r\n\
         List-Id: \"Bench\" <bench.localhost>\r\n\
         List-Unsubscribe: <http://bench.localhost/u/123456/abcdef>\r\n\
         List-Unsubscribe-Post: List-Unsubscribe=One-Click\r\n\
         Feedback-ID: 1:1:broadsheet\r\n\r\n",
    );
    let line = "<p>Sending mail fast means doing little per message: render once, sign.</p>\r\n";
    while message.len() < size {
        message.push_str(line);
    }
    message.into_bytes()
}

fn main() {
    let (mut threads, mut seconds, mut size) = (signing_threads(), 3.0, 23_000);
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().expect("a value after the flag");
        match arg.as_str() {
            "--threads" => threads = value().parse().expect("--threads N"),
            "--seconds" => seconds = value().parse().expect("--seconds S"),
            "--size" => size = value().parse().expect("--size BYTES"),
            other => panic!("unknown argument {other}"),
        }
    }
    let key = fresh_key();
    let message = typical_message(size);
    eprintln!("measuring for {seconds} s each on 1 and {threads} thread(s) ...");
    for line in Rates::measure(&key, &message, threads, seconds).lines(message.len()) {
        println!("{line}");
    }
}
