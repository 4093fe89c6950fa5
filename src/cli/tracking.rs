//! `broadsheet tracking SUBDOMAIN on|off`: open and click tracking in the issues a newsletter
//! sends (on by default).

use std::path::Path;

use clap::ValueEnum;

use super::{Failure, about_subdomain, open_migrated};
use crate::domain::newsletters;

/// Tracking as the operator names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TrackingValue {
    On,
    Off,
}

impl TrackingValue {
    fn enabled(self) -> bool {
        self == TrackingValue::On
    }

    fn of(enabled: bool) -> Self {
        if enabled {
            TrackingValue::On
        } else {
            TrackingValue::Off
        }
    }
}

/// As the operator types it (clap's one name for each value).
impl std::fmt::Display for TrackingValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let value = self.to_possible_value().expect("no value is skipped");
        f.write_str(value.get_name())
    }
}

pub(super) fn run(data_dir: &Path, subdomain: &str, setting: TrackingValue) -> Result<(), Failure> {
    let mut conn = open_migrated(data_dir)?;
    let newsletter = newsletters::set_tracking(&mut conn, subdomain, setting.enabled())
        .map_err(about_subdomain(subdomain))?;
    println!(
        "{}: tracking {}",
        newsletter.subdomain,
        TrackingValue::of(newsletter.tracking_enabled)
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tracking_values_round_trip_through_the_setting() {
        for value in TrackingValue::value_variants() {
            assert_eq!(TrackingValue::of(value.enabled()), *value);
        }
        assert_eq!(TrackingValue::On.to_string(), "on");
        assert_eq!(TrackingValue::Off.to_string(), "off");
    }
}
