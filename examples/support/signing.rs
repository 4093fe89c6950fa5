//! The DKIM signing rate: how many messages a second the project's own [`Signer`] signs on a
//! number of threads, the raw RSA-2048 rate of the pure-Rust `rsa` crate (mail-auth's
//! `rust-crypto` backend) beside it, and `openssl speed` as the reference for the fastest
//! implementation on this machine. With DKIM on, every recipient's copy is signed (the body
//! differs per recipient), so the signing rate on the sender's cores bounds a send.

use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use broadsheet::domain::newsletters::dkim::OperatorKey;
use broadsheet::mail::dkim::Signer;

/// Signatures per second of `sign`, called in a loop on `threads` threads for `seconds`.
fn rate(threads: usize, seconds: f64, sign: &(dyn Fn() + Sync)) -> f64 {
    let stop = AtomicBool::new(false);
    let done = AtomicU64::new(0);
    let started = Instant::now();
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                while !stop.load(Ordering::Relaxed) {
                    sign();
                    done.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
        std::thread::sleep(Duration::from_secs_f64(seconds));
        stop.store(true, Ordering::Relaxed);
    });
    done.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64()
}

/// Messages per second the project's [`Signer`] signs `message` with `key` on `threads`
/// threads (each message hashed, canonicalised and signed, as the sender does).
pub fn signer_rate(key: &OperatorKey, message: &[u8], threads: usize, seconds: f64) -> f64 {
    let signer = Signer::new(key).expect("the DKIM key loads");
    rate(threads, seconds, &|| {
        signer.sign(message).expect("signing works");
    })
}

/// RSA-2048 PKCS #1 v1.5 signatures per second of the `rsa` crate (what mail-auth's
/// `rust-crypto` feature signs with, blinding off as mail-auth calls it), on a DigestInfo of
/// SHA-256's size: the RSA operation alone, no hashing.
pub fn rsa_crate_rate(key: &OperatorKey, threads: usize, seconds: f64) -> f64 {
    use rsa::pkcs1::DecodeRsaPrivateKey;
    let private = rsa::RsaPrivateKey::from_pkcs1_der(&key.private_key).expect("PKCS #1 key");
    let digest_info = [0x5a_u8; 51];
    rate(threads, seconds, &|| {
        private
            .sign(rsa::Pkcs1v15Sign::new_unprefixed(), &digest_info)
            .expect("signing works");
    })
}

/// `openssl speed -seconds 3 [-multi N] rsa2048`: RSA-2048 signatures per second, or why
/// there is no figure.
pub fn openssl_rate(threads: usize) -> Result<f64, String> {
    let mut command = Command::new("openssl");
    command.args(["speed", "-seconds", "3"]);
    if threads > 1 {
        command.args(["-multi", &threads.to_string()]);
    }
    let out = command
        .arg("rsa2048")
        .output()
        .map_err(|e| format!("openssl did not run ({e}); install the openssl package"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    // "rsa 2048 bits 0.000396s 0.000025s   2527.2  39365.3": sign/s is the third figure.
    text.lines()
        .find(|l| l.starts_with("rsa 2048 bits") || l.starts_with("rsa  2048 bits"))
        .and_then(|l| {
            l.split_whitespace()
                .filter_map(|f| f.parse::<f64>().ok())
                .nth(1)
        })
        .ok_or_else(|| format!("no rsa 2048 line from openssl speed:\n{text}"))
}

/// A 2048-bit key generated here, signing as `bench.example`.
pub fn fresh_key() -> OperatorKey {
    let pair = mail_auth::dkim::generate::DkimKeyPair::generate_rsa(2048).expect("a key");
    OperatorKey {
        domain: "bench.example".into(),
        selector: "broadsheet".into(),
        private_key: pair.private_key().to_vec(),
    }
}

/// What one probe measured, in signatures per second.
pub struct Rates {
    pub threads: usize,
    pub signer_one: f64,
    pub signer_all: f64,
    pub rsa_crate_one: f64,
    pub rsa_crate_all: f64,
    pub openssl_one: Result<f64, String>,
    pub openssl_all: Result<f64, String>,
}

impl Rates {
    /// Every rate, on one thread and on `threads`, `seconds` each (openssl: 3 s each).
    pub fn measure(key: &OperatorKey, message: &[u8], threads: usize, seconds: f64) -> Rates {
        Rates {
            threads,
            signer_one: signer_rate(key, message, 1, seconds),
            signer_all: signer_rate(key, message, threads, seconds),
            rsa_crate_one: rsa_crate_rate(key, 1, seconds),
            rsa_crate_all: rsa_crate_rate(key, threads, seconds),
            openssl_one: openssl_rate(1),
            openssl_all: openssl_rate(threads),
        }
    }

    /// The figures, one line each.
    pub fn lines(&self, message_len: usize) -> Vec<String> {
        let openssl = |r: &Result<f64, String>| match r {
            Ok(rate) => format!("{rate:.0}/s"),
            Err(e) => format!("not measured: {e}"),
        };
        let threads = self.threads;
        let reference = self.openssl_all.as_ref().ok().copied();
        let of_openssl = |rate: f64| match reference {
            Some(reference) => format!(" ({:.2} of openssl's)", rate / reference),
            None => String::new(),
        };
        vec![
            format!(
                "signing rate, the project's Signer ({message_len}-byte message): {:.0}/s on 1 thread, {:.0}/s on {threads}{}",
                self.signer_one,
                self.signer_all,
                of_openssl(self.signer_all)
            ),
            format!(
                "signing rate, rsa crate (RSA-2048 alone): {:.0}/s on 1 thread, {:.0}/s on {threads}{}",
                self.rsa_crate_one,
                self.rsa_crate_all,
                of_openssl(self.rsa_crate_all)
            ),
            format!(
                "openssl speed -seconds 3 rsa2048 (reference): {}; -multi {threads}: {}",
                openssl(&self.openssl_one),
                openssl(&self.openssl_all)
            ),
        ]
    }
}
