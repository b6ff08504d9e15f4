//! `--name value` options, nothing more.

use std::collections::HashMap;

/// Parsed `--name value` pairs.
pub(crate) struct Args {
    values: HashMap<String, String>,
}

impl Args {
    pub(crate) fn parse(argv: impl Iterator<Item = String>) -> Result<Self, String> {
        let mut values = HashMap::new();
        let mut argv = argv.peekable();
        while let Some(flag) = argv.next() {
            let Some(name) = flag.strip_prefix("--") else {
                return Err(format!("unexpected argument `{flag}`"));
            };
            let value = argv
                .next()
                .ok_or_else(|| format!("`--{name}` needs a value"))?;
            values.insert(name.to_owned(), value);
        }
        Ok(Self { values })
    }

    pub(crate) fn text(&self, name: &str) -> Option<&str> {
        self.values.get(name).map(String::as_str)
    }

    pub(crate) fn required(&self, name: &str) -> Result<&str, String> {
        self.text(name)
            .ok_or_else(|| format!("`--{name}` is required"))
    }

    pub(crate) fn number(&self, name: &str, default: u64) -> Result<u64, String> {
        match self.text(name) {
            None => Ok(default),
            Some(v) => v
                .parse()
                .map_err(|_| format!("`--{name}` takes a whole number, not `{v}`")),
        }
    }
}
