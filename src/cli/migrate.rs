//! `broadsheet migrate`: applies pending migrations and says which (serve applies them too).

use std::path::Path;

use super::Failure;
use crate::store;

pub(super) fn run(data_dir: &Path) -> Result<(), Failure> {
    let mut conn = store::open(&store::database_path(data_dir))?;
    let applied = store::migrate(&mut conn)?;
    if applied.is_empty() {
        println!(
            "database is up to date ({} migrations)",
            store::MIGRATIONS.len()
        );
    } else {
        for name in applied {
            println!("applied {name}");
        }
    }
    Ok(())
}
