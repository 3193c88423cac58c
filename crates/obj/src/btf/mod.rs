//! The object's own BTF (`.BTF`) and its extension (`.BTF.ext`).
//!
//! Only what loading needs is interpreted: the type graph (map definitions are
//! encoded in it), data sections (`.maps`, `.ksyms`) and the func/line records.

mod ext;
mod types;

pub use ext::{BtfExt, CoreReloRecord, FuncRecord, LineRecord};
pub use types::{Btf, BtfType, DataSecVar, Linkage, Member, Param};
