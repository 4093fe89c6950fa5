//! A newsletter's sending domain: the domain of its `sender_email`, with a DKIM key of its
//! own. The owner publishes the key's record; once a lookup through the resolver of
//! custom domains (`--dns-server`) finds it, the newsletter's mail is signed with `d=` that
//! domain instead of the operator's (docs/deliverability.md, "Your sending domain").
//!
//! One key per owner and domain: an owner's newsletters at the same domain share one record,
//! and another owner who types the same domain gets a key and selector of their own, which only
//! whoever controls the domain's DNS can publish. So nobody can read or use a domain another
//! owner has verified.

use rusqlite::{Connection, OptionalExtension, Row};

use crate::clock::Timestamp;
use crate::domain::newsletters::Newsletter;
use crate::domain::newsletters::custom_domains::{Answer, Dns};
use crate::domain::newsletters::dkim::{self, SigningKey};
use crate::domain::values::secrets::random_hex;
use crate::domain::{DomainError, DomainResult};
use crate::store::Db;

crate::string_enum!(
    /// `pending` until the first lookup finds the record, then `verified`; `failed` when a
    /// lookup found no record or a different key.
    pub Status { Pending => "pending", Verified => "verified", Failed => "failed" }
);

/// A sending domain as stored, without its private key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SenderDomain {
    pub id: i64,
    pub owner_id: i64,
    pub domain: String,
    pub selector: String,
    /// The `p=` of the record: base64 SubjectPublicKeyInfo DER.
    pub public_key: String,
    pub status: Status,
    /// Why the last verification did not succeed; `None` before the first and once verified.
    pub reason: Option<String>,
    pub checked_at: Option<Timestamp>,
    pub verified_at: Option<Timestamp>,
}

impl SenderDomain {
    /// Where the DKIM record goes: `<selector>._domainkey.<domain>`.
    pub fn record_name(&self) -> String {
        format!("{}._domainkey.{}", self.selector, self.domain)
    }

    /// What the DKIM record holds: `v=DKIM1; k=rsa; p=<base64>`.
    pub fn record_value(&self) -> String {
        format!("v=DKIM1; k=rsa; p={}", self.public_key)
    }

    /// The record to publish, one line, as `broadsheet dkim` prints the operator's.
    pub fn dkim_record(&self) -> String {
        dkim::dns_record(&self.selector, &self.domain, &self.public_key)
    }

    /// An SPF record that lets the mail server send for the domain; the address (or the
    /// relay's `include:`) is the operator's to fill in.
    pub fn spf_hint(&self) -> String {
        format!(
            "{} TXT \"v=spf1 ip4:<your mail server's address> ~all\"",
            self.domain
        )
    }

    /// A DMARC record that only reports (`p=none`), the safe start.
    pub fn dmarc_hint(&self) -> String {
        format!(
            "_dmarc.{0} TXT \"v=DMARC1; p=none; rua=mailto:dmarc-reports@{0}\"",
            self.domain
        )
    }

    pub fn is_verified(&self) -> bool {
        self.status == Status::Verified
    }
}

/// The columns `from_row` reads, spliced into each SELECT at compile time.
macro_rules! select_domain {
    ($tail:literal) => {
        concat!(
            "SELECT id, owner_id, domain, selector, public_key, status, reason, checked_at, ",
            "verified_at FROM sender_domains ",
            $tail
        )
    };
}

fn from_row(row: &Row<'_>) -> rusqlite::Result<SenderDomain> {
    Ok(SenderDomain {
        id: row.get(0)?,
        owner_id: row.get(1)?,
        domain: row.get(2)?,
        selector: row.get(3)?,
        public_key: row.get(4)?,
        status: row.get(5)?,
        reason: row.get(6)?,
        checked_at: row.get(7)?,
        verified_at: row.get(8)?,
    })
}

/// The domain of a sender address: lowercase, without a trailing dot; `None` when the
/// newsletter has no sender address (its mail then comes from the service's own host).
pub fn domain_of(sender_email: &str) -> Option<String> {
    let (_, domain) = sender_email.trim().rsplit_once('@')?;
    let domain = domain.trim_end_matches('.').to_lowercase();
    (!domain.is_empty()).then_some(domain)
}

fn find(conn: &Connection, owner_id: i64, domain: &str) -> DomainResult<Option<SenderDomain>> {
    const SQL: &str = select_domain!("WHERE owner_id = ?1 AND domain = ?2");
    Ok(conn
        .query_row(SQL, (owner_id, domain), from_row)
        .optional()?)
}

/// The newsletter's sending domain with its key, made the first time it is asked for (the
/// dashboard or the API shows it); `None` without a sender address. A changed sender address
/// leads to that domain's own key and state. Generating a key takes 100 ms or more: call this
/// on a blocking thread ([`Db::run`]), never on the async ones.
pub fn for_newsletter(conn: &Connection, n: &Newsletter) -> DomainResult<Option<SenderDomain>> {
    let Some(domain) = domain_of(&n.sender_email) else {
        return Ok(None);
    };
    if let Some(found) = find(conn, n.owner_id, &domain)? {
        return Ok(Some(found));
    }
    // The key is made outside any transaction, so the writer is not held meanwhile; when
    // two requests race, the first insert wins and both read it back.
    let private_key = dkim::generate_private_key()?;
    let public_key = dkim::public_key_base64(&private_key)?;
    const INSERT: &str = "INSERT INTO sender_domains
         (owner_id, domain, selector, private_key, public_key, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)
         ON CONFLICT DO NOTHING";
    conn.execute(
        INSERT,
        (
            n.owner_id,
            &domain,
            format!("bs{}", random_hex(4)),
            private_key,
            public_key,
            Timestamp::now(),
        ),
    )?;
    find(conn, n.owner_id, &domain)?
        .map(Some)
        .ok_or(DomainError::NotFound("sending domain"))
}

/// The key the newsletter's mail is signed with when its sending domain is verified; `None`
/// otherwise (the operator's key, if any, signs then).
pub fn signing_key(conn: &Connection, n: &Newsletter) -> DomainResult<Option<SigningKey>> {
    let Some(domain) = domain_of(&n.sender_email) else {
        return Ok(None);
    };
    const SQL: &str = "SELECT domain, selector, private_key FROM sender_domains
         WHERE owner_id = ?1 AND domain = ?2 AND status = 'verified'";
    Ok(conn
        .query_row(SQL, (n.owner_id, &domain), |r| {
            Ok(SigningKey {
                domain: r.get(0)?,
                selector: r.get(1)?,
                private_key: r.get(2)?,
            })
        })
        .optional()?)
}

/// What a lookup of the record showed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// A TXT record at the name publishes this key.
    Published,
    /// No record, or not this key: why, for people.
    Wrong(String),
    /// The resolver gave no answer (a timeout, a server failure): nothing was learnt.
    NoAnswer(String),
}

/// Whether the TXT records found at the record's name publish `domain`'s key.
pub fn judge(domain: &SenderDomain, seen: &Answer<String>) -> Verdict {
    let name = domain.record_name();
    match seen {
        Answer::Found(values) => {
            let keys: Vec<String> = values.iter().filter_map(|v| published_key(v)).collect();
            if keys.contains(&domain.public_key) {
                Verdict::Published
            } else if keys.is_empty() {
                Verdict::Wrong(format!(
                    "TXT record {name} holds no DKIM key (no p= tag); it should be \"{}\"",
                    domain.record_value()
                ))
            } else {
                Verdict::Wrong(format!(
                    "TXT record {name} publishes a different key; copy the p= value shown here exactly"
                ))
            }
        }
        Answer::Missing => Verdict::Wrong(format!("TXT record {name} not found")),
        Answer::Failed(e) => Verdict::NoAnswer(format!("the TXT lookup of {name} failed: {e}")),
    }
}

/// The `p=` of a DKIM record, without the spaces DNS providers may put in long values.
fn published_key(record: &str) -> Option<String> {
    record.split(';').find_map(|tag| {
        let (name, value) = tag.split_once('=')?;
        (name.trim() == "p").then(|| value.split_whitespace().collect())
    })
}

/// Looks the record up through `--dns-server` and records the outcome: `verified` when it
/// publishes the key, else `failed` with the reason. A lookup that got no answer (a timeout)
/// keeps the status and records the reason, so a verified domain is not lost to a hiccup.
pub async fn verify(db: &Db, dns: &Dns, n: &Newsletter) -> DomainResult<SenderDomain> {
    let newsletter = n.clone();
    let domain = db
        .run(move |conn| for_newsletter(conn, &newsletter))
        .await?
        .ok_or_else(|| {
            DomainError::invalid(
                "sender_email",
                "is not set: set a sender address at your own domain first",
            )
        })?;
    let seen = dns.txt(&domain.record_name()).await;
    let verdict = judge(&domain, &seen);
    db.run(move |conn| record_outcome(conn, &domain, verdict))
        .await
}

fn record_outcome(
    conn: &Connection,
    domain: &SenderDomain,
    verdict: Verdict,
) -> DomainResult<SenderDomain> {
    let (status, reason) = match verdict {
        Verdict::Published => (Status::Verified, None),
        Verdict::Wrong(reason) => (Status::Failed, Some(reason)),
        Verdict::NoAnswer(reason) => (domain.status, Some(reason)),
    };
    const UPDATE: &str = "UPDATE sender_domains
         SET status = ?2, reason = ?3, checked_at = ?4,
             verified_at = CASE WHEN ?2 = 'verified' THEN coalesce(verified_at, ?4) ELSE NULL END
         WHERE id = ?1";
    conn.execute(UPDATE, (domain.id, status, reason, Timestamp::now()))?;
    find(conn, domain.owner_id, &domain.domain)?.ok_or(DomainError::NotFound("sending domain"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::newsletters;
    use crate::domain::testing::db_with_newsletter;

    fn newsletter(conn: &Connection, sender_email: &str) -> Newsletter {
        conn.execute("UPDATE newsletters SET sender_email = ?1", [sender_email])
            .unwrap();
        newsletters::get(conn, 1).unwrap()
    }

    #[test]
    fn the_domain_of_a_sender_address() {
        assert_eq!(
            domain_of("News@Mail.Example.ORG").as_deref(),
            Some("mail.example.org")
        );
        assert_eq!(domain_of("a@example.org.").as_deref(), Some("example.org"));
        assert_eq!(domain_of(""), None);
        assert_eq!(domain_of("a@"), None);
    }

    #[test]
    fn a_key_per_owner_and_domain_that_signs_once_verified() {
        let conn = db_with_newsletter("paid");
        assert_eq!(for_newsletter(&conn, &newsletter(&conn, "")).unwrap(), None);
        let n = newsletter(&conn, "news@example.org");
        let made = for_newsletter(&conn, &n).unwrap().unwrap();
        assert_eq!(made.status, Status::Pending);
        assert!(made.selector.starts_with("bs") && made.selector.len() == 10);
        assert_eq!(
            made.dkim_record(),
            format!(
                "{}._domainkey.example.org TXT \"v=DKIM1; k=rsa; p={}\"",
                made.selector, made.public_key
            )
        );
        let again = for_newsletter(&conn, &newsletter(&conn, "other@EXAMPLE.org")).unwrap();
        assert_eq!(again.as_ref(), Some(&made), "the same domain, the same key");
        assert!(
            signing_key(&conn, &n).unwrap().is_none(),
            "not verified yet"
        );

        let wrong = Answer::Found(vec!["v=DKIM1; k=rsa; p=MIIBsomethingelse".into()]);
        let verdict = judge(&made, &wrong);
        assert!(matches!(&verdict, Verdict::Wrong(r) if r.contains("different key")));
        let failed = record_outcome(&conn, &made, verdict).unwrap();
        assert_eq!(failed.status, Status::Failed);

        // Split into strings of 255 and spaced by the DNS provider: still the key.
        let (head, tail) = made.public_key.split_at(100);
        let published = Answer::Found(vec![
            "v=spf1 -all".into(),
            format!("v=DKIM1; k=rsa; p={head} {tail}"),
        ]);
        assert_eq!(judge(&made, &published), Verdict::Published);
        let verified = record_outcome(&conn, &made, Verdict::Published).unwrap();
        assert!(verified.is_verified() && verified.reason.is_none());
        let key = signing_key(&conn, &n).unwrap().expect("verified: signs");
        assert_eq!(
            (key.domain.as_str(), key.selector.as_str()),
            ("example.org", made.selector.as_str())
        );

        // A lookup without an answer keeps the domain verified.
        let hiccup = judge(&made, &Answer::Failed("timed out".into()));
        let kept = record_outcome(&conn, &verified, hiccup).unwrap();
        assert!(kept.is_verified(), "{kept:?}");
        assert!(kept.reason.unwrap().contains("timed out"));

        // Another domain starts over; another owner at the same domain has a key of its own.
        let moved = newsletter(&conn, "news@example.net");
        assert!(signing_key(&conn, &moved).unwrap().is_none());
        assert_eq!(
            for_newsletter(&conn, &moved).unwrap().unwrap().status,
            Status::Pending
        );
        conn.execute_batch(
            "INSERT INTO users (email, password_hash, created_at, updated_at) VALUES ('p@x.co', 'h', '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z');
             UPDATE newsletters SET owner_id = 2, sender_email = 'news@example.org';",
        )
        .unwrap();
        let stranger = newsletters::get(&conn, 1).unwrap();
        assert!(
            signing_key(&conn, &stranger).unwrap().is_none(),
            "not theirs to use"
        );
        let theirs = for_newsletter(&conn, &stranger).unwrap().unwrap();
        assert_ne!(theirs.public_key, made.public_key);
        assert_ne!(theirs.selector, made.selector);
        assert_eq!(theirs.status, Status::Pending);
    }

    #[test]
    fn a_missing_record_or_one_without_a_key_is_said_plainly() {
        let conn = db_with_newsletter("paid");
        let d = for_newsletter(&conn, &newsletter(&conn, "n@example.org"))
            .unwrap()
            .unwrap();
        let Verdict::Wrong(missing) = judge(&d, &Answer::Missing) else {
            panic!()
        };
        assert_eq!(
            missing,
            format!("TXT record {}._domainkey.example.org not found", d.selector)
        );
        let Verdict::Wrong(keyless) = judge(&d, &Answer::Found(vec!["hello".into()])) else {
            panic!()
        };
        assert!(keyless.contains("no DKIM key"), "{keyless}");
    }
}
