//! Values every part of the domain shares and none owns: checked e-mail addresses and web
//! addresses, the text patterns names and subjects keep to, cursors and pages, the one
//! string mapping of states, time zones, the service's public URLs, random tokens and hashes,
//! and the cipher for third parties' secrets. A leaf: nothing here names another part of the
//! domain, so any part may use it.

pub mod credentials;
pub mod email;
pub mod pagination;
pub mod secrets;
pub mod states;
pub mod text_pattern;
pub mod time_zones;
pub mod urls;
pub mod web_url;
