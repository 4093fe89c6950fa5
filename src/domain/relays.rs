//! Mail relays: the installation's (`--smtp-url`, one or more, in order of preference) and a
//! newsletter's own (its owner's ESP account). What a relay may take: its limits.

use super::DomainResult;

/// How many messages a relay takes, at most: per second (spacing), and per rolling hour and
/// day. `None`: no limit of that kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RelayLimits {
    pub per_second: Option<u32>,
    pub per_hour: Option<u32>,
    pub per_day: Option<u32>,
}

impl RelayLimits {
    /// The limits named in a relay URL's query (`?per_second=14&per_day=50000`); any other
    /// parameter, or a value that is not a whole number from 1 up, is an error naming it.
    pub fn from_query<'a>(pairs: impl Iterator<Item = (&'a str, &'a str)>) -> Result<Self, String> {
        let mut limits = RelayLimits::default();
        for (name, value) in pairs {
            let slot = match name {
                "per_second" => &mut limits.per_second,
                "per_hour" => &mut limits.per_hour,
                "per_day" => &mut limits.per_day,
                other => {
                    return Err(format!(
                        "unknown relay setting {other:?} (the limits are per_second, per_hour \
                         and per_day)"
                    ));
                }
            };
            match value.parse::<u32>() {
                Ok(n) if n >= 1 => *slot = Some(n),
                _ => {
                    return Err(format!(
                        "{name} must be a whole number of messages from 1 up, not {value:?}"
                    ));
                }
            }
        }
        Ok(limits)
    }

    /// Whether any limit is set.
    pub fn any(&self) -> bool {
        self.per_second.is_some() || self.per_hour.is_some() || self.per_day.is_some()
    }

    /// Checks limits typed by an owner: each a whole number from 1 up when given.
    pub fn check(&self) -> DomainResult<()> {
        let mut errors = super::FieldErrors::new();
        for (field, value) in [
            ("per_second", self.per_second),
            ("per_hour", self.per_hour),
            ("per_day", self.per_day),
        ] {
            if value == Some(0) {
                errors.add(field, "must be at least 1 (leave it empty for no limit)");
            }
        }
        errors.into_result()
    }
}

/// Today's cap of `newsletter`'s warm-up plan, when the plan is on (messages a calendar day
/// in its time zone, growing each day).
pub fn warm_up_cap_today(
    _conn: &rusqlite::Connection,
    _newsletter: &super::newsletters::Newsletter,
) -> DomainResult<Option<u64>> {
    // The plan's settings land with the newsletter relay settings (issue 27, item 5).
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_come_from_the_url_query() {
        let limits =
            RelayLimits::from_query([("per_second", "14"), ("per_day", "50000")].into_iter())
                .unwrap();
        assert_eq!(
            limits,
            RelayLimits {
                per_second: Some(14),
                per_hour: None,
                per_day: Some(50000)
            }
        );
        assert!(RelayLimits::from_query([("per_minute", "3")].into_iter()).is_err());
        assert!(RelayLimits::from_query([("per_day", "0")].into_iter()).is_err());
        assert!(RelayLimits::from_query([("per_day", "x")].into_iter()).is_err());
        assert!(
            RelayLimits {
                per_hour: Some(0),
                ..RelayLimits::default()
            }
            .check()
            .is_err()
        );
    }
}
