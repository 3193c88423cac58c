//! Any bytes a program passes as `attr` decode without panicking, with the
//! kernel's size rules; decoded commands re-encode to
//! the same typed command.

use bpfjet_sys::{decode, encode, Errno, ATTR_SIZE};
use proptest::prelude::*;

proptest! {
    #[test]
    fn arbitrary_attrs_decode_or_fail_cleanly(cmd in 0u32..40, attr in proptest::collection::vec(any::<u8>(), 0..300)) {
        match decode(cmd, &attr) {
            Ok(c) => {
                prop_assert!(cmd <= 36);
                prop_assert_eq!(c.cmd() as u32, cmd);
                // The typed command survives encoding (padding and bytes
                // after a name's NUL are not part of it, as in the kernel).
                let again = decode(cmd, &encode(&c));
                prop_assert_eq!(again, Ok(c));
            }
            Err(e) => prop_assert!(matches!(e, Errno::E2BIG | Errno::EINVAL), "{:?}", e),
        }
    }

    #[test]
    fn longer_attrs_need_a_zero_tail(extra in 1usize..64, at in 0usize..64, byte in 1u8..) {
        let mut attr = vec![0u8; ATTR_SIZE + extra];
        prop_assert!(decode(1, &attr).is_ok());
        let i = ATTR_SIZE + at % extra;
        attr[i] = byte;
        prop_assert_eq!(decode(1, &attr), Err(Errno::E2BIG));
    }
}
