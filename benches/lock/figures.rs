//! The figures of a run: every measured value by its JSON key, in the order measured.

use std::collections::BTreeMap;

/// Every figure of the run, by JSON key, in insertion order.
#[derive(Default)]
pub(crate) struct Figures {
    order: Vec<String>,
    values: BTreeMap<String, Value>,
}

#[derive(Clone)]
enum Value {
    Num(f64),
    Text(String),
}

impl Figures {
    pub(crate) fn set(&mut self, key: &str, v: f64) {
        self.put(key, Value::Num(v));
    }

    pub(crate) fn set_opt(&mut self, key: &str, v: Option<f64>) {
        self.set(key, v.unwrap_or(f64::NAN));
    }

    pub(crate) fn text(&mut self, key: &str, v: &str) {
        self.put(key, Value::Text(v.to_owned()));
    }

    fn put(&mut self, key: &str, v: Value) {
        if self.values.insert(key.to_owned(), v).is_none() {
            self.order.push(key.to_owned());
        }
    }

    pub(crate) fn get(&self, key: &str) -> f64 {
        match self.values.get(key) {
            Some(Value::Num(v)) => *v,
            _ => f64::NAN,
        }
    }

    /// The text figure `key`, if it was set.
    pub(crate) fn get_text(&self, key: &str) -> Option<&str> {
        match self.values.get(key) {
            Some(Value::Text(s)) => Some(s),
            _ => None,
        }
    }

    pub(crate) fn to_json(&self) -> String {
        let body: Vec<String> = self
            .order
            .iter()
            .map(|k| match &self.values[k] {
                Value::Num(v) if v.is_finite() => format!("  \"{k}\": {v:.3}"),
                Value::Num(_) => format!("  \"{k}\": null"),
                Value::Text(s) => format!("  \"{k}\": \"{}\"", s.replace('"', "'")),
            })
            .collect();
        format!("{{\n{}\n}}\n", body.join(",\n"))
    }
}

/// One library's samples at one thread count: (library, threads, metric, µs values).
pub(crate) type Sample = (String, usize, &'static str, Vec<f64>);
