//! A validated e-mail address: trimmed, lowercased, plausibly deliverable.

use std::fmt;

/// The longest address SMTP carries, in bytes.
pub const MAX_BYTES: usize = 254;

/// An address that passed [`EmailAddress::parse`]; the only way to get one.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct EmailAddress(String);

impl EmailAddress {
    /// Accepts `local@domain.tld` with a dotted domain of letters, digits and hyphens; refuses
    /// spaces, control characters, quotes and angle brackets (they break headers), and
    /// anything over the SMTP limits (64 local, 254 total).
    pub fn parse(raw: &str) -> Result<Self, &'static str> {
        let email = raw.trim().to_lowercase();
        if email.is_empty() {
            return Err("can't be blank");
        }
        if email.len() > MAX_BYTES {
            return Err("is too long");
        }
        let Some((local, domain)) = email.rsplit_once('@') else {
            return Err("is invalid");
        };
        let local_ok = !local.is_empty()
            && local.len() <= 64
            && !local.starts_with('.')
            && !local.ends_with('.')
            && !local.contains("..")
            && local.chars().all(|c| {
                c.is_ascii_alphanumeric()
                    || "!#$%&'*+-/=?^_`{|}~.".contains(c)
                    || (!c.is_ascii() && !c.is_control() && !c.is_whitespace())
            });
        let labels: Vec<&str> = domain.split('.').collect();
        let domain_ok = labels.len() >= 2
            && labels.iter().all(|label| {
                !label.is_empty()
                    && label.len() <= 63
                    && !label.starts_with('-')
                    && !label.ends_with('-')
                    && label.chars().all(|c| {
                        c.is_ascii_alphanumeric()
                            || c == '-'
                            || (!c.is_ascii() && c.is_alphanumeric())
                    })
            })
            && labels
                .last()
                .is_some_and(|tld| tld.len() >= 2 && !tld.chars().all(|c| c.is_ascii_digit()));
        if local_ok && domain_ok {
            Ok(EmailAddress(email))
        } else {
            Err("is invalid")
        }
    }

    /// The part after the `@`.
    pub fn domain(&self) -> &str {
        self.as_str()
            .rsplit_once('@')
            .map_or("", |(_, domain)| domain)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn into_string(self) -> String {
        self.0
    }
}

impl fmt::Display for EmailAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for EmailAddress {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::EmailAddress;

    #[test]
    fn accepts_and_normalises_real_addresses() {
        for ok in [
            "a@b.co",
            " Ann.Lee+news@Example.COM ",
            "x_y@mail.example.org",
            "o'neil@ex-ample.io",
        ] {
            let parsed = EmailAddress::parse(ok).unwrap_or_else(|e| panic!("{ok}: {e}"));
            assert_eq!(parsed.as_str(), ok.trim().to_lowercase());
        }
    }

    #[test]
    fn refuses_junk() {
        for bad in [
            "",
            "   ",
            "plain",
            "@example.com",
            "a@",
            "a@b",
            "a@b.c",
            "a b@example.com",
            "a@exa mple.com",
            "a@@example.com",
            ".a@example.com",
            "a..b@example.com",
            "a@-x.com",
            "a@x..com",
            "<a@x.com>",
            "a\"b@x.com",
            "a@x.123",
            "a\r\n@x.com",
        ] {
            assert!(
                EmailAddress::parse(bad).is_err(),
                "{bad:?} should be refused"
            );
        }
        assert!(EmailAddress::parse(&format!("{}@example.com", "a".repeat(65))).is_err());
    }
}
