//! XDP attach through netlink (`RTM_SETLINK` with `IFLA_XDP`), as the
//! kernel's `dev_change_xdp_fd` decides it, and what `RTM_GETLINK` reports.

use crate::attach::{self, Attachment, XDP_FLAGS_MODES, XDP_FLAGS_REPLACE};
use crate::attach::{XDP_FLAGS_HW_MODE, XDP_FLAGS_UPDATE_IF_NOEXIST};
use crate::backend::BpfjetBackend;
use crate::namespace::{Kind, Namespace, ObjRef};
use crate::objects::{Obj, ProgRecord};
use crate::progs::BPF_PROG_TYPE_XDP;
use bpfjet_obj::Object;
use bpfjet_runtime::LoadedObject;
use bpfjet_sys::Errno;

/// An `IFLA_XDP` request: `fd` -1 detaches; `expected_fd` with
/// `XDP_FLAGS_REPLACE`.
#[derive(Clone, Copy, Debug)]
pub struct XdpRequest {
    pub ifindex: u32,
    pub fd: i32,
    pub flags: u32,
    pub expected_fd: Option<i32>,
}

impl BpfjetBackend {
    /// The program id behind a bpfjet program fd.
    fn prog_id_of(&self, fd: i32) -> Option<Result<(u32, u32), Errno>> {
        if fd < 0 {
            return None;
        }
        match self.obj(fd as u32)? {
            Obj::Prog(p) => Some(Ok((p.rec.id, p.rec.prog_type))),
            _ => Some(Err(Errno::EINVAL)),
        }
    }

    /// Serve an `IFLA_XDP` request when it concerns bpfjet: attaching a
    /// bpfjet program, or detaching/replacing on an interface bpfjet serves.
    /// None: the kernel's business (a kernel program, an interface bpfjet
    /// has no attachment on).
    pub fn netlink_xdp(&self, r: &XdpRequest) -> Option<Result<(), Errno>> {
        let current = self.ns.attachment(r.ifindex);
        let new = match self.prog_id_of(r.fd) {
            Some(Ok(p)) => Some(p),
            Some(Err(e)) => return Some(Err(e)),
            None if r.fd >= 0 || current.is_none() => return None,
            None => None,
        };
        Some(self.change_xdp(r, current, new))
    }

    fn change_xdp(
        &self,
        r: &XdpRequest,
        current: Option<Attachment>,
        new: Option<(u32, u32)>,
    ) -> Result<(), Errno> {
        if r.flags & !(XDP_FLAGS_MODES | XDP_FLAGS_REPLACE | XDP_FLAGS_UPDATE_IF_NOEXIST) != 0
            || (r.flags & XDP_FLAGS_MODES).count_ones() > 1
        {
            return Err(Errno::EINVAL);
        }
        if r.flags & XDP_FLAGS_HW_MODE != 0 {
            return Err(Errno::EOPNOTSUPP);
        }
        if current.as_ref().is_some_and(|c| c.link_id != 0) {
            // A link owns the interface's XDP hook.
            return Err(Errno::EBUSY);
        }
        if r.flags & XDP_FLAGS_REPLACE != 0 {
            let expected = match r.expected_fd {
                Some(fd) if fd >= 0 => match self.prog_id_of(fd) {
                    Some(Ok((id, _))) => Some(id),
                    _ => return Err(Errno::EEXIST),
                },
                _ => None,
            };
            if current.as_ref().map(|c| c.prog_id) != expected {
                return Err(Errno::EEXIST);
            }
        }
        let Some((prog_id, prog_type)) = new else {
            if let Some(c) = current {
                attach::undeploy(&self.ns, r.ifindex);
                self.release(ObjRef::Prog(c.prog_id));
            }
            return Ok(());
        };
        if prog_type != BPF_PROG_TYPE_XDP {
            return Err(Errno::EINVAL);
        }
        if current.is_some() && r.flags & XDP_FLAGS_UPDATE_IF_NOEXIST != 0 {
            return Err(Errno::EBUSY);
        }
        self.attach_prog(r.ifindex, prog_id, r.flags & XDP_FLAGS_MODES, 0, current)
    }

    /// Attach (deploy) or hot-replace `prog_id` on `ifindex`.
    pub(crate) fn attach_prog(
        &self,
        ifindex: u32,
        prog_id: u32,
        mode: u32,
        link_id: u32,
        current: Option<Attachment>,
    ) -> Result<(), Errno> {
        let a = Attachment {
            ifindex,
            ifname: attach::ifname(ifindex)?,
            prog_id,
            mode,
            link_id,
            revision: current.as_ref().map_or(0, |c| c.revision + 1),
        };
        match current {
            Some(c) if c.prog_id == prog_id && c.mode == mode => Ok(()),
            Some(c) if c.mode == mode => {
                attach::replace(&self.ns, &a)?;
                self.release(ObjRef::Prog(c.prog_id));
                Ok(())
            }
            Some(c) => {
                // Another mode: the kernel refuses generic and native at
                // once; replacing the mode is a fresh deploy.
                attach::undeploy(&self.ns, ifindex);
                self.ns.write_attachment(&a)?;
                let r = attach::deploy(&self.ns, &a);
                self.release(ObjRef::Prog(c.prog_id));
                r
            }
            None => {
                self.ns.write_attachment(&a)?;
                attach::deploy(&self.ns, &a)
            }
        }
    }

    /// What `RTM_GETLINK` reports for `ifindex`: bpfjet's attachment.
    pub fn xdp_attachment(&self, ifindex: u32) -> Option<Attachment> {
        self.ns.attachment(ifindex)
    }

    /// Whether any interface has a bpfjet attachment (else `RTM_GETLINK`
    /// replies need no rewriting).
    pub fn has_attachments(&self) -> bool {
        !self.ns.attachments().is_empty()
    }
}

/// A program of the instance as a data plane runs it: the object built
/// from its record (one XDP program bound to the instance's maps), the
/// loaded object and the program's name.
pub fn data_plane_program(
    ns: &Namespace,
    id: u32,
) -> Result<(Object, LoadedObject, String), String> {
    let rec: ProgRecord = serde_json::from_slice(
        &ns.read_record(Kind::Prog, id)
            .map_err(|_| format!("program id {id} does not exist in instance {}", ns.name()))?,
    )
    .map_err(|e| format!("program id {id}: corrupt record: {e}"))?;
    if rec.prog_type != BPF_PROG_TYPE_XDP {
        return Err(format!(
            "program id {id} has type {}, not XDP",
            rec.prog_type
        ));
    }
    let instance = bpfjet_maps::Instance::open(ns.name()).map_err(|e| e.to_string())?;
    // With its extensions linked in and the programs its PROG_ARRAYs hold.
    crate::tail_calls::runnable(ns, &rec, instance).map_err(|r| r.log)
}
