//! URL-encoded form bodies, with repeated keys (`api_key[permissions][]`) kept: the
//! dashboard's forms and the public sites' read them alike.

use poem::Body;

/// The largest form body accepted (CSV uploads use their own limit).
const FORM_LIMIT: usize = 1024 * 1024;

/// A parsed form: every `(name, value)` pair in order.
#[derive(Debug, Default, Clone)]
pub struct FormData(Vec<(String, String)>);

/// A form body that could not be read (too large, cut off); each door answers it as a bad
/// request in its own way.
#[derive(Debug)]
pub struct UnreadableForm(pub String);

impl std::fmt::Display for UnreadableForm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "unreadable form: {}", self.0)
    }
}

impl FormData {
    pub async fn read(body: Body) -> Result<Self, UnreadableForm> {
        let bytes = body
            .into_bytes_limit(FORM_LIMIT)
            .await
            .map_err(|e| UnreadableForm(e.to_string()))?;
        Ok(Self::parse(&bytes))
    }

    pub fn parse(bytes: &[u8]) -> Self {
        FormData(url::form_urlencoded::parse(bytes).into_owned().collect())
    }

    /// The first value of `name`, or "" when absent.
    pub fn get(&self, name: &str) -> &str {
        self.0
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
            .unwrap_or("")
    }

    /// Every field as posted, in order.
    pub fn pairs(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// Every value of `name`, in order.
    pub fn all(&self, name: &str) -> Vec<String> {
        self.0
            .iter()
            .filter(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .collect()
    }
}
