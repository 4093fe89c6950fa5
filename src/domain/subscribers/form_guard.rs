//! The bot checks of signup forms posted from anywhere (docs/growth.md, "Keeping bots out"),
//! none of which needs a third-party service:
//!
//! - a **proof-of-work** in the ALTCHA challenge format (so ALTCHA's own widget can solve
//!   it, as `assets/forms.js` does): the server hands out a challenge signed with the server
//!   secret, expiring after [`CHALLENGE_LIFETIME`], naming its form, costing the form's
//!   `pow_cost`; a solution works once (`used_challenges`);
//! - a **honeypot** field ([`HONEYPOT_FIELD`]) people never see nor fill;
//! - a **minimum fill time** ([`MIN_FILL`]) where the page was ours (a form the site
//!   rendered carries the signed time it was shown, [`STARTED_FIELD`]).
//!
//! The throttles that bound the mail a flood can cause are in `opt_in::request_from_form`.
//!
//! Written here rather than with an ALTCHA crate: the two on crates.io compare signatures
//! in variable time and read the wall clock (the tests move this service's clock), and the
//! format is three hashes (its unit test solves a challenge as the widget does).

use base64::Engine;
use jiff::SignedDuration;
use rand::Rng;
use rusqlite::Connection;
use serde::{Deserialize, Serialize};

use crate::clock::{self, Timestamp};
use crate::domain::subscribers::signup_forms::SignupForm;
use crate::domain::values::secrets::{ServerSecret, constant_time_eq, random_hex, sha256_hex};
use crate::domain::{DomainError, DomainResult};

/// How long a challenge may be solved and posted.
pub const CHALLENGE_LIFETIME: SignedDuration = SignedDuration::from_mins(10);
/// A form shown by the site and posted sooner than this was not filled in by a person.
pub const MIN_FILL: SignedDuration = SignedDuration::from_secs(2);
/// The honeypot: a field hidden from people (off-screen, `tabindex=-1`, `autocomplete=off`).
pub const HONEYPOT_FIELD: &str = "website";
/// The signed time a form was shown, on the forms the site renders.
pub const STARTED_FIELD: &str = "started";
/// The solved challenge, as the ALTCHA widget posts it (base64 of its JSON).
pub const CHALLENGE_FIELD: &str = "altcha";
/// The one algorithm offered.
const ALGORITHM: &str = "SHA-256";
/// The purpose of the server secret's signatures of challenges and start times.
const PURPOSE: &str = "signup-form-challenge";
const STARTED_PURPOSE: &str = "signup-form-started";

/// A challenge as the ALTCHA widget fetches it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Challenge {
    pub algorithm: String,
    pub challenge: String,
    pub maxnumber: i64,
    pub salt: String,
    pub signature: String,
}

/// A solution as the widget posts it.
#[derive(Debug, Clone, Deserialize)]
struct Solution {
    algorithm: String,
    challenge: String,
    number: i64,
    salt: String,
    signature: String,
}

/// A new challenge for `form`: SHA-256 of the salt and a secret number up to the form's
/// cost. The salt carries `expires` (Unix seconds, ALTCHA's own parameter, which the widget
/// reads) and the form's public id.
pub fn challenge(secret: &ServerSecret, form: &SignupForm) -> Challenge {
    let expires = (clock::now() + CHALLENGE_LIFETIME).as_second();
    let salt = format!(
        "{}?expires={expires}&form={}",
        random_hex(12),
        form.public_id
    );
    let number = rand::rng().random_range(0..=form.pow_cost);
    let challenge = sha256_hex(&format!("{salt}{number}"));
    Challenge {
        algorithm: ALGORITHM.to_string(),
        signature: secret.sign(PURPOSE, &challenge),
        challenge,
        maxnumber: form.pow_cost,
        salt,
    }
}

/// The parameter `name` of a salt (`…?expires=1&form=ab`).
fn salt_param<'a>(salt: &'a str, name: &str) -> Option<&'a str> {
    let (_, query) = salt.split_once('?')?;
    query
        .split('&')
        .find_map(|pair| pair.strip_prefix(name)?.strip_prefix('='))
}

/// Why a posted solution does not count, in the reader's words.
const NOT_SOLVED: &str = "could not be checked: please reload the page and try again";

/// Checks the posted `payload` (base64 JSON) against `form` and uses it up, inside the
/// caller's transaction. Refused (field `altcha`) when it is not a solution of a challenge
/// this server made for this form, has expired, or was used before.
pub fn use_solution(
    tx: &Connection,
    secret: &ServerSecret,
    form: &SignupForm,
    payload: &str,
) -> DomainResult<()> {
    let refused = || DomainError::invalid(CHALLENGE_FIELD, NOT_SOLVED);
    let json = base64::engine::general_purpose::STANDARD
        .decode(payload.trim())
        .map_err(|_| refused())?;
    let s: Solution = serde_json::from_slice(&json).map_err(|_| refused())?;
    let now = clock::now().as_second();
    let fits = s.algorithm == ALGORITHM
        && secret.verify(PURPOSE, &s.challenge, &s.signature)
        && (0..=form.pow_cost).contains(&s.number)
        && constant_time_eq(
            &sha256_hex(&format!("{}{}", s.salt, s.number)),
            &s.challenge,
        )
        && salt_param(&s.salt, "form") == Some(form.public_id.as_str());
    let expires = salt_param(&s.salt, "expires").and_then(|e| e.parse::<i64>().ok());
    if !fits || expires.is_none_or(|at| at < now) {
        return Err(refused());
    }
    let expires_at = Timestamp::from(
        jiff::Timestamp::from_second(expires.unwrap_or(now)).unwrap_or_else(|_| clock::now()),
    );
    const PRUNE: &str = "DELETE FROM used_challenges WHERE challenge IN
         (SELECT challenge FROM used_challenges WHERE expires_at < ?1 LIMIT 100)";
    tx.execute(PRUNE, [Timestamp::now()])?;
    const USE: &str = "INSERT INTO used_challenges (challenge, expires_at) VALUES (?1, ?2)
         ON CONFLICT (challenge) DO NOTHING";
    match tx.execute(USE, (&s.challenge, expires_at))? {
        0 => Err(refused()),
        _ => Ok(()),
    }
}

/// The signed time a form of the site is shown, for [`STARTED_FIELD`].
pub fn started_token(secret: &ServerSecret, form_id: &str) -> String {
    let at = clock::now().as_millisecond();
    let value = format!("{form_id}:{at}");
    format!("{at}.{}", secret.sign(STARTED_PURPOSE, &value))
}

/// Whether a post carrying the start token `token` came sooner than [`MIN_FILL`] after its
/// form was shown; a token that is missing or not this server's says nothing (`false`):
/// forms pasted elsewhere have none.
pub fn too_fast(secret: &ServerSecret, form_id: &str, token: &str) -> bool {
    let Some((at, signature)) = token.split_once('.') else {
        return false;
    };
    let Ok(at) = at.parse::<i64>() else {
        return false;
    };
    let signed = secret.verify(STARTED_PURPOSE, &format!("{form_id}:{at}"), signature);
    signed && clock::now().as_millisecond() - at < MIN_FILL.as_millis() as i64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::subscribers::signup_forms::FormInput;

    fn form(cost: i64) -> SignupForm {
        let input = FormInput::new_form();
        SignupForm {
            id: 1,
            newsletter_id: 1,
            public_id: "f00d".into(),
            name: input.name,
            ask_name: true,
            tags: vec![],
            button_text: input.button_text,
            success_message: input.success_message,
            redirect_url: None,
            allowed_origins: vec![],
            pow_cost: cost,
            created_at: Timestamp::now(),
            fields: vec![],
        }
    }

    /// Solves as the ALTCHA widget does: every number from 0 until the hash matches; the
    /// base64 JSON it posts.
    pub(crate) fn solve(c: &Challenge) -> String {
        let number = (0..=c.maxnumber)
            .find(|n| sha256_hex(&format!("{}{n}", c.salt)) == c.challenge)
            .expect("a solution");
        let json = serde_json::json!({"algorithm": c.algorithm, "challenge": c.challenge,
            "number": number, "salt": c.salt, "signature": c.signature, "took": 1});
        base64::engine::general_purpose::STANDARD.encode(json.to_string())
    }

    fn db() -> Connection {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(
            "CREATE TABLE used_challenges (challenge TEXT PRIMARY KEY, expires_at TEXT NOT NULL)",
        )
        .unwrap();
        conn
    }

    #[test]
    fn a_solution_works_once_for_its_own_form() {
        let (secret, conn) = (ServerSecret::for_tests(b"k"), db());
        let f = form(2_000);
        let c = challenge(&secret, &f);
        assert_eq!(c.maxnumber, 2_000);
        assert!(salt_param(&c.salt, "expires").is_some());
        let solved = solve(&c);
        assert!(use_solution(&conn, &secret, &form(2_000), &solved).is_ok());
        assert!(
            use_solution(&conn, &secret, &f, &solved).is_err(),
            "used up"
        );
        // Another form's, another server's, a forged number, garbage: refused.
        let mut other = form(2_000);
        other.public_id = "beef".into();
        let fresh = solve(&challenge(&secret, &f));
        assert!(use_solution(&conn, &secret, &other, &fresh).is_err());
        assert!(use_solution(&conn, &ServerSecret::for_tests(b"x"), &f, &fresh).is_err());
        assert!(use_solution(&conn, &secret, &f, "not base64!").is_err());
        assert!(use_solution(&conn, &secret, &f, &fresh).is_ok());
    }

    #[test]
    fn a_start_token_tells_a_post_that_came_too_soon() {
        let secret = ServerSecret::for_tests(b"k");
        let token = started_token(&secret, "f00d");
        assert!(too_fast(&secret, "f00d", &token));
        assert!(
            !too_fast(&secret, "beef", &token),
            "another form's says nothing"
        );
        assert!(!too_fast(&secret, "f00d", ""));
        let old = format!("1000.{}", secret.sign(STARTED_PURPOSE, "f00d:1000"));
        assert!(!too_fast(&secret, "f00d", &old));
    }
}
