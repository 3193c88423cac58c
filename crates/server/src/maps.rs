//! The map commands on a bpfjet map.

use crate::user;
use bpfjet_maps::{Map, MapError, MapType};
use bpfjet_sys::{Errno, MapElem};

const BPF_F_LOCK: u64 = 4;

pub fn errno(e: &MapError) -> Errno {
    Errno(e.errno())
}

/// Bytes of one value as user space passes it: per-CPU maps carry one
/// 8-byte aligned slot per possible CPU.
fn value_len(map: &Map) -> usize {
    if map.map_type().is_per_cpu() {
        (map.value_size() as usize).next_multiple_of(8) * map.ncpus() as usize
    } else {
        map.value_size() as usize
    }
}

fn has_keys(map: &Map) -> bool {
    !matches!(
        map.map_type(),
        MapType::Queue | MapType::Stack | MapType::BloomFilter | MapType::Ringbuf
    )
}

fn key<'a>(map: &Map, addr: u64) -> Result<&'a [u8], Errno> {
    user::slice(addr, map.key_size() as usize)
}

pub fn lookup(map: &Map, e: &MapElem) -> Result<(), Errno> {
    if e.flags & !BPF_F_LOCK != 0 {
        return Err(Errno::EINVAL);
    }
    if !has_keys(map) {
        // Queue/stack lookup is peek; bloom lookup is a membership test
        // with the value.
        return match map.map_type() {
            MapType::Queue | MapType::Stack => {
                let mut out = vec![0u8; map.value_size() as usize];
                map.peek(&mut out).map_err(|e| errno(&e))?;
                user::write(e.value, &out)
            }
            MapType::BloomFilter => {
                let mut v = user::read(e.value, map.value_size() as usize)?;
                map.peek(&mut v).map_err(|e| errno(&e))
            }
            _ => Err(Errno::ENOTSUPP),
        };
    }
    let k = key(map, e.key)?;
    if map.map_type().is_per_cpu() {
        let stride = (map.value_size() as usize).next_multiple_of(8);
        let values = map.lookup_percpu(k).map_err(|e| errno(&e))?;
        let mut out = vec![0u8; value_len(map)];
        for (i, v) in values.iter().enumerate() {
            out[i * stride..i * stride + v.len()].copy_from_slice(v);
        }
        return user::write(e.value, &out);
    }
    let v = map.lookup_copy_flags(k, e.flags).map_err(|e| errno(&e))?;
    user::write(e.value, &v)
}

pub fn update(map: &Map, e: &MapElem) -> Result<(), Errno> {
    if !has_keys(map) {
        let v = user::slice(e.value, map.value_size() as usize)?;
        return map.push(v, e.flags).map_err(|e| errno(&e));
    }
    let k = key(map, e.key)?;
    let v = user::slice(e.value, value_len(map))?;
    if map.map_type().is_per_cpu() {
        let stride = (map.value_size() as usize).next_multiple_of(8);
        let vs = map.value_size() as usize;
        let slots: Vec<&[u8]> = v.chunks(stride).map(|c| &c[..vs]).collect();
        return map.update_percpu(k, &slots, e.flags).map_err(|e| errno(&e));
    }
    map.update_elem(k, v, e.flags).map_err(|e| errno(&e))
}

pub fn delete(map: &Map, e: &MapElem) -> Result<(), Errno> {
    if !has_keys(map) {
        return Err(Errno::EINVAL);
    }
    map.delete_elem(key(map, e.key)?).map_err(|e| errno(&e))
}

pub fn next_key(map: &Map, e: &MapElem) -> Result<(), Errno> {
    let k = if e.key == 0 {
        None
    } else {
        Some(key(map, e.key)?)
    };
    let next = map.get_next_key(k).map_err(|e| errno(&e))?;
    user::write(e.value, &next)
}

pub fn lookup_and_delete(map: &Map, e: &MapElem) -> Result<(), Errno> {
    match map.map_type() {
        MapType::Queue | MapType::Stack => {
            let v = map.pop_elem().map_err(|e| errno(&e))?;
            user::write(e.value, &v)
        }
        MapType::Hash | MapType::PercpuHash | MapType::LruHash | MapType::LruPercpuHash => {
            lookup(map, e)?;
            delete(map, e)
        }
        _ => Err(Errno::ENOTSUPP),
    }
}

pub fn freeze(map: &Map) -> Result<(), Errno> {
    // A frozen map's fds lose write permission, which the kernel checks
    // first: freezing again is EPERM, not EBUSY.
    if map.is_frozen() {
        return Err(Errno::EPERM);
    }
    map.freeze();
    Ok(())
}
