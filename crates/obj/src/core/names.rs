//! libbpf's "flavor" convention: `task_struct___old` is the local spelling
//! of `task_struct`; everything from the last `___` between two non-`_`
//! characters is ignored when matching names.

/// `name` without its `___flavor` suffix.
pub fn essential_name(name: &str) -> &str {
    let b = name.as_bytes();
    let n = b.len();
    // A flavor separator is X___Y with X and Y not underscores; take the last.
    for i in (0..n.saturating_sub(4)).rev() {
        if b[i] != b'_' && &b[i + 1..i + 4] == b"___" && b[i + 4] != b'_' {
            return &name[..=i];
        }
    }
    name
}

/// Whether two names are equal ignoring flavors.
pub fn same_essential(a: &str, b: &str) -> bool {
    essential_name(a) == essential_name(b)
}

#[cfg(test)]
mod tests {
    use super::essential_name;

    #[test]
    fn flavors_are_stripped_at_the_last_separator() {
        assert_eq!(essential_name("task_struct___old"), "task_struct");
        assert_eq!(essential_name("a___b___c"), "a___b");
        assert_eq!(essential_name("plain"), "plain");
        assert_eq!(essential_name("x____y"), "x____y");
        assert_eq!(essential_name("___y"), "___y");
        assert_eq!(essential_name("bits___v2"), "bits");
        assert_eq!(essential_name(""), "");
    }
}
