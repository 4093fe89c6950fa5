//! Counts in words for people, one rule for the dashboard and the public sites: "1
//! subscriber", "4 subscribers", "0 subscribers".

/// `n` followed by `one` when `n` is 1, else by `many`.
pub fn count(n: i64, one: &str, many: &str) -> String {
    format!("{n} {}", noun(n, one, many))
}

/// `one` when `n` is 1, else `many`: for a count shown apart from its noun.
pub fn noun<'a>(n: i64, one: &'a str, many: &'a str) -> &'a str {
    if n == 1 { one } else { many }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_is_singular_and_everything_else_plural() {
        assert_eq!(count(1, "subscriber", "subscribers"), "1 subscriber");
        assert_eq!(count(4, "subscriber", "subscribers"), "4 subscribers");
        assert_eq!(count(0, "delivery", "deliveries"), "0 deliveries");
        assert_eq!(noun(-1, "issue", "issues"), "issues");
    }
}
