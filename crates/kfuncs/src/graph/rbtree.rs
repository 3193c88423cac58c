//! An intrusive red-black tree through the `bpf_rb_node` fields of
//! objects, rooted in a `bpf_rb_root` (the kernel's `rb_root_cached`).
//!
//! Layouts (the sizes of the kernel's uapi structs; the program cannot
//! read these fields, the verifier refuses direct access):
//! - root, 16 bytes: `[root node][leftmost node]`;
//! - node, 32 bytes: `[parent | black bit][right][left][owner root]`, as
//!   the kernel's `rb_node` followed by its `owner`.
//!
//! Node addresses are addresses of the node fields, as the program sees
//! them. Colours follow CLRS (Introduction to Algorithms, ch. 13).
//!
//! # Safety
//! Every function takes raw addresses of a root and of nodes the verifier
//! proved to be such fields (objects from `bpf_obj_new` of the root's
//! contained type), accessed under the root's `bpf_spin_lock`.

// Every function shares the contract of the module docs' Safety section.
#![allow(clippy::missing_safety_doc)]

type Node = *mut u64;

const BLACK: u64 = 1;

unsafe fn parent(n: Node) -> Node {
    unsafe { (*n & !BLACK) as Node }
}
unsafe fn set_parent(n: Node, p: Node) {
    unsafe { *n = (p as u64) | (*n & BLACK) }
}
unsafe fn right(n: Node) -> Node {
    unsafe { *n.add(1) as Node }
}
unsafe fn left(n: Node) -> Node {
    unsafe { *n.add(2) as Node }
}
unsafe fn set_right(n: Node, c: Node) {
    unsafe { *n.add(1) = c as u64 }
}
unsafe fn set_left(n: Node, c: Node) {
    unsafe { *n.add(2) = c as u64 }
}
unsafe fn is_red(n: Node) -> bool {
    !n.is_null() && unsafe { *n & BLACK == 0 }
}
unsafe fn set_black(n: Node, black: bool) {
    unsafe { *n = (*n & !BLACK) | u64::from(black) }
}
/// The root a node is in (0 when in none).
pub unsafe fn owner(n: u64) -> u64 {
    unsafe { *(n as *const u64).add(3) }
}
pub unsafe fn set_owner(n: u64, root: u64) {
    unsafe { *(n as *mut u64).add(3) = root }
}

unsafe fn top(root: u64) -> Node {
    unsafe { *(root as *const u64) as Node }
}
unsafe fn set_top(root: u64, n: Node) {
    unsafe { *(root as *mut u64) = n as u64 }
}

/// `bpf_rbtree_first`: the leftmost node, 0 when empty.
pub unsafe fn first(root: u64) -> u64 {
    unsafe { *(root as *const u64).add(1) }
}

/// `bpf_rbtree_root`: the root node, 0 when empty.
pub unsafe fn root_node(root: u64) -> u64 {
    unsafe { top(root) as u64 }
}

/// A child of `node` if `node` is in the tree at `root` (else 0, as the
/// kernel's `bpf_rbtree_left/right`).
pub unsafe fn child(root: u64, node: u64, go_left: bool) -> u64 {
    unsafe {
        if owner(node) != root {
            return 0;
        }
        let n = node as Node;
        (if go_left { left(n) } else { right(n) }) as u64
    }
}

unsafe fn replace_child(root: u64, p: Node, old: Node, new: Node) {
    unsafe {
        if p.is_null() {
            set_top(root, new);
        } else if left(p) == old {
            set_left(p, new);
        } else {
            set_right(p, new);
        }
    }
}

unsafe fn rotate_left(root: u64, x: Node) {
    unsafe {
        let y = right(x);
        set_right(x, left(y));
        if !left(y).is_null() {
            set_parent(left(y), x);
        }
        let p = parent(x);
        set_parent(y, p);
        replace_child(root, p, x, y);
        set_left(y, x);
        set_parent(x, y);
    }
}

unsafe fn rotate_right(root: u64, x: Node) {
    unsafe {
        let y = left(x);
        set_left(x, right(y));
        if !right(y).is_null() {
            set_parent(right(y), x);
        }
        let p = parent(x);
        set_parent(y, p);
        replace_child(root, p, x, y);
        set_right(y, x);
        set_parent(x, y);
    }
}

/// Link `node` (not in any tree) into the tree at `root`, going left
/// whenever `less(node, parent)` says so, as the kernel's
/// `__bpf_rbtree_add`. `less` may fail (a fault of the program's
/// callback): the tree is then left unchanged.
pub unsafe fn add<E>(
    root: u64,
    node: u64,
    mut less: impl FnMut(u64, u64) -> Result<bool, E>,
) -> Result<(), E> {
    unsafe {
        let z = node as Node;
        let mut p: Node = std::ptr::null_mut();
        let mut x = top(root);
        let mut go_left = false;
        let mut leftmost = true;
        while !x.is_null() {
            p = x;
            go_left = less(node, x as u64)?;
            if go_left {
                x = left(x);
            } else {
                x = right(x);
                leftmost = false;
            }
        }
        *z = p as u64; // red
        set_left(z, std::ptr::null_mut());
        set_right(z, std::ptr::null_mut());
        if p.is_null() {
            set_top(root, z);
        } else if go_left {
            set_left(p, z);
        } else {
            set_right(p, z);
        }
        if leftmost {
            *(root as *mut u64).add(1) = node;
        }
        set_owner(node, root);
        insert_fixup(root, z);
        Ok(())
    }
}

unsafe fn insert_fixup(root: u64, mut z: Node) {
    unsafe {
        while is_red(parent(z)) {
            let p = parent(z);
            let g = parent(p);
            if p == left(g) {
                let y = right(g);
                if is_red(y) {
                    set_black(p, true);
                    set_black(y, true);
                    set_black(g, false);
                    z = g;
                } else {
                    if z == right(p) {
                        z = p;
                        rotate_left(root, z);
                    }
                    let p = parent(z);
                    let g = parent(p);
                    set_black(p, true);
                    set_black(g, false);
                    rotate_right(root, g);
                }
            } else {
                let y = left(g);
                if is_red(y) {
                    set_black(p, true);
                    set_black(y, true);
                    set_black(g, false);
                    z = g;
                } else {
                    if z == left(p) {
                        z = p;
                        rotate_right(root, z);
                    }
                    let p = parent(z);
                    let g = parent(p);
                    set_black(p, true);
                    set_black(g, false);
                    rotate_left(root, g);
                }
            }
        }
        set_black(top(root), true);
    }
}

unsafe fn minimum(mut n: Node) -> Node {
    unsafe {
        while !left(n).is_null() {
            n = left(n);
        }
        n
    }
}

/// The in-order successor of `n` (null for the last).
unsafe fn next(mut n: Node) -> Node {
    unsafe {
        if !right(n).is_null() {
            return minimum(right(n));
        }
        let mut p = parent(n);
        while !p.is_null() && n == right(p) {
            n = p;
            p = parent(p);
        }
        p
    }
}

unsafe fn transplant(root: u64, u: Node, v: Node) {
    unsafe {
        replace_child(root, parent(u), u, v);
        if !v.is_null() {
            set_parent(v, parent(u));
        }
    }
}

/// `bpf_rbtree_remove`: unlink `node` if it is in the tree at `root`;
/// returns it, or 0 when it is not there.
pub unsafe fn remove(root: u64, node: u64) -> u64 {
    unsafe {
        if owner(node) != root {
            return 0;
        }
        let z = node as Node;
        if first(root) == node {
            *(root as *mut u64).add(1) = next(z) as u64;
        }
        let mut removed_black = !is_red(z);
        let x;
        let xp;
        if left(z).is_null() {
            x = right(z);
            xp = parent(z);
            transplant(root, z, x);
        } else if right(z).is_null() {
            x = left(z);
            xp = parent(z);
            transplant(root, z, x);
        } else {
            let y = minimum(right(z));
            removed_black = !is_red(y);
            x = right(y);
            if parent(y) == z {
                xp = y;
            } else {
                xp = parent(y);
                transplant(root, y, x);
                set_right(y, right(z));
                set_parent(right(y), y);
            }
            transplant(root, z, y);
            set_left(y, left(z));
            set_parent(left(y), y);
            set_black(y, !is_red(z));
        }
        if removed_black {
            delete_fixup(root, x, xp);
        }
        *z = 0;
        set_left(z, std::ptr::null_mut());
        set_right(z, std::ptr::null_mut());
        set_owner(node, 0);
        node
    }
}

unsafe fn delete_fixup(root: u64, mut x: Node, mut xp: Node) {
    unsafe {
        while x != top(root) && !is_red(x) {
            if x == left(xp) {
                let mut w = right(xp);
                if is_red(w) {
                    set_black(w, true);
                    set_black(xp, false);
                    rotate_left(root, xp);
                    w = right(xp);
                }
                if !is_red(left(w)) && !is_red(right(w)) {
                    set_black(w, false);
                    x = xp;
                    xp = parent(x);
                } else {
                    if !is_red(right(w)) {
                        set_black(left(w), true);
                        set_black(w, false);
                        rotate_right(root, w);
                        w = right(xp);
                    }
                    set_black(w, !is_red(xp));
                    set_black(xp, true);
                    set_black(right(w), true);
                    rotate_left(root, xp);
                    x = top(root);
                    break;
                }
            } else {
                let mut w = left(xp);
                if is_red(w) {
                    set_black(w, true);
                    set_black(xp, false);
                    rotate_right(root, xp);
                    w = left(xp);
                }
                if !is_red(right(w)) && !is_red(left(w)) {
                    set_black(w, false);
                    x = xp;
                    xp = parent(x);
                } else {
                    if !is_red(left(w)) {
                        set_black(right(w), true);
                        set_black(w, false);
                        rotate_left(root, w);
                        w = left(xp);
                    }
                    set_black(w, !is_red(xp));
                    set_black(xp, true);
                    set_black(left(w), true);
                    rotate_right(root, xp);
                    x = top(root);
                    break;
                }
            }
        }
        if !x.is_null() {
            set_black(x, true);
        }
    }
}

/// Every node of the tree, unlinked (to free a root's contents).
pub unsafe fn drain(root: u64) -> Vec<u64> {
    unsafe {
        let mut out = Vec::new();
        let mut stack = vec![top(root)];
        while let Some(n) = stack.pop() {
            if n.is_null() {
                continue;
            }
            stack.push(left(n));
            stack.push(right(n));
            out.push(n as u64);
        }
        for &n in &out {
            std::ptr::write_bytes(n as *mut u64, 0, 4);
        }
        std::ptr::write_bytes(root as *mut u64, 0, 2);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Black height of the subtree, checking the red-black invariants.
    unsafe fn check(n: Node, lo: Option<u64>, hi: Option<u64>, key: &dyn Fn(Node) -> u64) -> u32 {
        unsafe {
            if n.is_null() {
                return 1;
            }
            let k = key(n);
            assert!(lo.is_none_or(|l| k >= l) && hi.is_none_or(|h| k <= h));
            if is_red(n) {
                assert!(!is_red(left(n)) && !is_red(right(n)), "red with red child");
            }
            for c in [left(n), right(n)] {
                if !c.is_null() {
                    assert_eq!(parent(c), n);
                }
            }
            let l = check(left(n), lo, Some(k), key);
            let r = check(right(n), Some(k), hi, key);
            assert_eq!(l, r, "black heights differ");
            l + u32::from(!is_red(n))
        }
    }

    #[test]
    fn random_adds_and_removes_keep_invariants() {
        // Objects: [key][node: 4 words].
        let mut objs: Vec<Box<[u64; 5]>> = Vec::new();
        let root = Box::new([0u64; 2]);
        let r = root.as_ptr() as u64;
        let key = |n: Node| unsafe { *(n as *const u64).sub(1) };
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut rnd = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut inserted: Vec<u64> = Vec::new();
        for i in 0..3000 {
            if i % 3 == 2 && !inserted.is_empty() {
                let at = (rnd() % inserted.len() as u64) as usize;
                let n = inserted.swap_remove(at);
                assert_eq!(unsafe { remove(r, n) }, n);
                assert_eq!(unsafe { remove(r, n) }, 0, "already removed");
            } else {
                let mut o = Box::new([0u64; 5]);
                o[0] = rnd() % 500;
                let n = o.as_ptr() as u64 + 8;
                objs.push(o);
                unsafe {
                    add::<()>(r, n, |a, b| Ok(key(a as Node) < key(b as Node))).unwrap();
                }
                inserted.push(n);
            }
            unsafe {
                check(top(r), None, None, &key);
                let min = inserted.iter().map(|&n| key(n as Node)).min();
                assert_eq!(
                    (first(r) != 0).then(|| key(first(r) as Node)),
                    min,
                    "leftmost"
                );
            }
        }
        let mut count = 0;
        let mut n = unsafe { first(r) } as Node;
        let mut prev = 0;
        while !n.is_null() {
            assert!(key(n) >= prev);
            prev = key(n);
            count += 1;
            n = unsafe { next(n) };
        }
        assert_eq!(count, inserted.len());
        assert_eq!(unsafe { drain(r) }.len(), inserted.len());
        drop(root);
    }
}
