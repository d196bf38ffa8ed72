//! A small map by name (provider ids, model names) for the crate's own
//! state: the names sorted in one vector, the values beside them in
//! another. Iteration is in name order, as with a `BTreeMap`; the lookup is
//! one binary search shared by every value type, so each map costs only
//! the moving of its values.

/// Values by name, in name order.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Table<V> {
    names: Vec<String>,
    values: Vec<V>,
}

impl<V> Default for Table<V> {
    fn default() -> Self {
        Table {
            names: Vec::new(),
            values: Vec::new(),
        }
    }
}

/// Where `name` is, or where it would go.
#[inline(never)]
fn find(names: &[String], name: &str) -> Result<usize, usize> {
    names.binary_search_by(|n| n.as_str().cmp(name))
}

impl<V> Table<V> {
    /// The value of `name`.
    pub(crate) fn get(&self, name: &str) -> Option<&V> {
        find(&self.names, name).ok().map(|i| &self.values[i])
    }

    /// The value of `name`, to change.
    pub(crate) fn get_mut(&mut self, name: &str) -> Option<&mut V> {
        find(&self.names, name).ok().map(|i| &mut self.values[i])
    }

    /// Whether `name` has a value.
    pub(crate) fn contains_key(&self, name: &str) -> bool {
        find(&self.names, name).is_ok()
    }

    /// Sets the value of `name`, replacing any.
    pub(crate) fn insert(&mut self, name: String, value: V) {
        match find(&self.names, &name) {
            Ok(i) => self.values[i] = value,
            Err(i) => {
                self.names.insert(i, name);
                self.values.insert(i, value);
            }
        }
    }

    /// The value of `name`, made by `make` if it has none yet.
    pub(crate) fn get_or_insert_with(&mut self, name: &str, make: impl FnOnce() -> V) -> &mut V {
        let i = match find(&self.names, name) {
            Ok(i) => i,
            Err(i) => {
                self.names.insert(i, name.to_string());
                self.values.insert(i, make());
                i
            }
        };
        &mut self.values[i]
    }

    /// The names, in order.
    pub(crate) fn keys(&self) -> impl Iterator<Item = &str> {
        self.names.iter().map(String::as_str)
    }

    /// Names and values, in name order, the values to change.
    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = (&String, &mut V)> {
        self.names.iter().zip(self.values.iter_mut())
    }
}

impl<V> std::ops::Index<&str> for Table<V> {
    type Output = V;

    fn index(&self, name: &str) -> &V {
        self.get(name).expect("no such name")
    }
}

#[cfg(test)]
mod tests {
    use super::Table;

    #[test]
    fn names_stay_sorted_and_unique() {
        let mut t = Table::default();
        for (k, v) in [("b", 1), ("a", 2), ("c", 3), ("b", 4)] {
            t.insert(k.to_string(), v);
        }
        assert_eq!(t.keys().collect::<Vec<_>>(), ["a", "b", "c"]);
        assert_eq!(t.get("b"), Some(&4));
        assert_eq!(t.get("d"), None);
        *t.get_or_insert_with("d", || 0) += 5;
        *t.get_or_insert_with("a", || 0) += 5;
        assert_eq!((t.get("d"), t.get("a")), (Some(&5), Some(&7)));
        assert!(t.contains_key("c") && !t.contains_key(""));
        *t.get_mut("c").unwrap() = 9;
        assert_eq!(t.get("c"), Some(&9));
    }
}
