//! `reftool migrate --db FILE`: brings a SQLite database to reftool's sample schema, inside one
//! transaction.
//!
//! Mutating, no interruption: the work cannot be cut (one transaction) nor usefully run
//! unattended, so it keeps a plain wall-clock limit. At the limit it rolls back and answers an
//! honest TIMEOUT 10 with the database unchanged. `REFTOOL_PACE_MS` sleeps before each step, so
//! a short `--timeout` reliably lands mid-transaction.
//!
//! The schema version lives in `PRAGMA user_version`; a database already at
//! [`TARGET_VERSION`] is left alone (`effect: "noop"`).

use rusqlite::{OpenFlags, TransactionBehavior};
use serde_json::{Value, json};

use crate::framework::userdb::{self, DbExits, DeclareDbExits, db_failure};
use crate::framework::{
    CommandSpec, Ctx, DangerLevel, Exit, Failure, FlagSpec, Phase, SideEffects,
};

/// The schema version this command migrates to.
pub const TARGET_VERSION: i64 = 1;

/// The steps of the migration, in order; each is one unit of work.
pub const STEPS: &[(&str, &str)] = &[
    ("create customers", "CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL)"),
    (
        "create orders",
        "CREATE TABLE orders (id INTEGER PRIMARY KEY, \
         customer_id INTEGER NOT NULL REFERENCES customers(id), total_cents INTEGER NOT NULL)",
    ),
    ("index orders by customer", "CREATE INDEX orders_by_customer ON orders(customer_id)"),
    ("create notes", "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT NOT NULL)"),
    ("record the schema version", "PRAGMA user_version = 1"),
];

/// The declaration.
pub fn spec() -> CommandSpec {
    CommandSpec::new(
        "migrate",
        "Apply reftool's schema migration to a SQLite database in one transaction",
        run,
    )
    .danger(DangerLevel::Mutating)
    .scope("db:write")
    .flag(FlagSpec::string("db", "Path of the SQLite database to migrate (it must exist)"))
    .timeout_ms(60_000)
    .exit(
        Exit::SUCCESS,
        "The database is at the target schema version",
        false,
        SideEffects::Complete,
    )
    .db_exits(&DbExits {
        precondition: "No database was named (non-interactive), or the file is not a SQLite \
                       database",
        not_found: "The database file does not exist",
        unavailable: "The database (or the state database) stayed locked by another writer; \
                      nothing changed",
    })
    .exit(
        Exit::TIMEOUT,
        "The wall-clock limit ran out; the transaction was rolled back and nothing changed",
        false,
        SideEffects::None,
    )
}

fn run(ctx: &mut Ctx) -> Result<Value, Failure> {
    let given = match ctx.args.text("db") {
        Some(path) => path.to_owned(),
        None => ctx.require_input("path of the database to migrate", "db")?,
    };
    let path = userdb::db_path(&given)?;
    if !path.exists() {
        return Err(Failure::new(
            Exit::NOT_FOUND,
            "DB_NOT_FOUND",
            format!("{} does not exist", path.display()),
        )
        .phase(Phase::Validation)
        .suggestion("create the database first, or check the path"));
    }
    if !path.is_file() {
        return Err(Failure::new(
            Exit::PRECONDITION,
            "DB_INVALID",
            format!("{} is not a file", path.display()),
        )
        .phase(Phase::Validation));
    }
    let fail = |e: rusqlite::Error| db_failure(&e, &path);
    let mut conn = userdb::open(&path, OpenFlags::SQLITE_OPEN_READ_WRITE)?;
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(fail)?;
    let from_version: i64 =
        tx.query_row("PRAGMA user_version", [], |row| row.get(0)).map_err(fail)?;
    let shown = path.display().to_string();
    if from_version >= TARGET_VERSION {
        tx.rollback().map_err(fail)?;
        if from_version > TARGET_VERSION {
            ctx.warn(
                "DB_SCHEMA_NEWER",
                format!(
                    "the database is at schema version {from_version}, newer than this \
                     migration's {TARGET_VERSION}; it was left alone"
                ),
            );
        }
        return Ok(json!({
            "effect": "noop",
            "db": shown,
            "from_version": from_version,
            "to_version": from_version,
            "steps_applied": 0,
        }));
    }
    let total = STEPS.len() as u64;
    for (done, (name, sql)) in STEPS.iter().enumerate() {
        // A stop (timeout, SIGTERM) here drops `tx`, which rolls everything back.
        ctx.pace()?;
        tx.execute_batch(sql).map_err(|e| db_failure(&e, &path).context(json!({"step": name})))?;
        ctx.progress(done as u64 + 1, Some(total), Some("steps"))?;
    }
    // Past this point no stop can win: the framework waits for the commit.
    ctx.begin_commit()?;
    tx.commit().map_err(fail)?;
    Ok(json!({
        "effect": "updated",
        "db": shown,
        "from_version": from_version,
        "to_version": TARGET_VERSION,
        "steps_applied": total,
    }))
}
