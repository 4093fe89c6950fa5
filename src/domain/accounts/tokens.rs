//! What a mailed account link is for. Its own file, so the throttles (`rate_limit`, which
//! count account mail per purpose) and the accounts that issue the links both name it
//! without naming each other.

crate::string_enum!(
    /// What a mailed account link does (`user_tokens.purpose`).
    pub TokenPurpose {
        ConfirmEmail => "confirm_email",
        ResetPassword => "reset_password",
        ChangeEmail => "change_email",
    }
);
