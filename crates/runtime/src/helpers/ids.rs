//! Kernel helper ids (`enum bpf_func_id`, stable uapi) and names, so that a
//! program calling a helper bpfjet lacks is refused with the helper's name.

/// `KERNEL_HELPER_NAMES[id]` is the name of helper `id` without the `bpf_`
/// prefix (`__BPF_FUNC_MAPPER` order; index 0 is `unspec`).
const KERNEL_HELPER_NAMES: &[&str] = &[
    "unspec",
    "map_lookup_elem",
    "map_update_elem",
    "map_delete_elem",
    "probe_read",
    "ktime_get_ns",
    "trace_printk",
    "get_prandom_u32",
    "get_smp_processor_id",
    "skb_store_bytes",
    "l3_csum_replace",
    "l4_csum_replace",
    "tail_call",
    "clone_redirect",
    "get_current_pid_tgid",
    "get_current_uid_gid",
    "get_current_comm",
    "get_cgroup_classid",
    "skb_vlan_push",
    "skb_vlan_pop",
    "skb_get_tunnel_key",
    "skb_set_tunnel_key",
    "perf_event_read",
    "redirect",
    "get_route_realm",
    "perf_event_output",
    "skb_load_bytes",
    "get_stackid",
    "csum_diff",
    "skb_get_tunnel_opt",
    "skb_set_tunnel_opt",
    "skb_change_proto",
    "skb_change_type",
    "skb_under_cgroup",
    "get_hash_recalc",
    "get_current_task",
    "probe_write_user",
    "current_task_under_cgroup",
    "skb_change_tail",
    "skb_pull_data",
    "csum_update",
    "set_hash_invalid",
    "get_numa_node_id",
    "skb_change_head",
    "xdp_adjust_head",
    "probe_read_str",
    "get_socket_cookie",
    "get_socket_uid",
    "set_hash",
    "setsockopt",
    "skb_adjust_room",
    "redirect_map",
    "sk_redirect_map",
    "sock_map_update",
    "xdp_adjust_meta",
    "perf_event_read_value",
    "perf_prog_read_value",
    "getsockopt",
    "override_return",
    "sock_ops_cb_flags_set",
    "msg_redirect_map",
    "msg_apply_bytes",
    "msg_cork_bytes",
    "msg_pull_data",
    "bind",
    "xdp_adjust_tail",
    "skb_get_xfrm_state",
    "get_stack",
    "skb_load_bytes_relative",
    "fib_lookup",
    "sock_hash_update",
    "msg_redirect_hash",
    "sk_redirect_hash",
    "lwt_push_encap",
    "lwt_seg6_store_bytes",
    "lwt_seg6_adjust_srh",
    "lwt_seg6_action",
    "rc_repeat",
    "rc_keydown",
    "skb_cgroup_id",
    "get_current_cgroup_id",
    "get_local_storage",
    "sk_select_reuseport",
    "skb_ancestor_cgroup_id",
    "sk_lookup_tcp",
    "sk_lookup_udp",
    "sk_release",
    "map_push_elem",
    "map_pop_elem",
    "map_peek_elem",
    "msg_push_data",
    "msg_pop_data",
    "rc_pointer_rel",
    "spin_lock",
    "spin_unlock",
    "sk_fullsock",
    "tcp_sock",
    "skb_ecn_set_ce",
    "get_listener_sock",
    "skc_lookup_tcp",
    "tcp_check_syncookie",
    "sysctl_get_name",
    "sysctl_get_current_value",
    "sysctl_get_new_value",
    "sysctl_set_new_value",
    "strtol",
    "strtoul",
    "sk_storage_get",
    "sk_storage_delete",
    "send_signal",
    "tcp_gen_syncookie",
    "skb_output",
    "probe_read_user",
    "probe_read_kernel",
    "probe_read_user_str",
    "probe_read_kernel_str",
    "tcp_send_ack",
    "send_signal_thread",
    "jiffies64",
    "read_branch_records",
    "get_ns_current_pid_tgid",
    "xdp_output",
    "get_netns_cookie",
    "get_current_ancestor_cgroup_id",
    "sk_assign",
    "ktime_get_boot_ns",
    "seq_printf",
    "seq_write",
    "sk_cgroup_id",
    "sk_ancestor_cgroup_id",
    "ringbuf_output",
    "ringbuf_reserve",
    "ringbuf_submit",
    "ringbuf_discard",
    "ringbuf_query",
    "csum_level",
    "skc_to_tcp6_sock",
    "skc_to_tcp_sock",
    "skc_to_tcp_timewait_sock",
    "skc_to_tcp_request_sock",
    "skc_to_udp6_sock",
    "get_task_stack",
    "load_hdr_opt",
    "store_hdr_opt",
    "reserve_hdr_opt",
    "inode_storage_get",
    "inode_storage_delete",
    "d_path",
    "copy_from_user",
    "snprintf_btf",
    "seq_printf_btf",
    "skb_cgroup_classid",
    "redirect_neigh",
    "per_cpu_ptr",
    "this_cpu_ptr",
    "redirect_peer",
    "task_storage_get",
    "task_storage_delete",
    "get_current_task_btf",
    "bprm_opts_set",
    "ktime_get_coarse_ns",
    "ima_inode_hash",
    "sock_from_file",
    "check_mtu",
    "for_each_map_elem",
    "snprintf",
    "sys_bpf",
    "btf_find_by_name_kind",
    "sys_close",
    "timer_init",
    "timer_set_callback",
    "timer_start",
    "timer_cancel",
    "get_func_ip",
    "get_attach_cookie",
    "task_pt_regs",
    "get_branch_snapshot",
    "trace_vprintk",
    "skc_to_unix_sock",
    "kallsyms_lookup_name",
    "find_vma",
    "loop",
    "strncmp",
    "get_func_arg",
    "get_func_ret",
    "get_func_arg_cnt",
    "get_retval",
    "set_retval",
    "xdp_get_buff_len",
    "xdp_load_bytes",
    "xdp_store_bytes",
    "copy_from_user_task",
    "skb_set_tstamp",
    "ima_file_hash",
    "kptr_xchg",
    "map_lookup_percpu_elem",
    "skc_to_mptcp_sock",
    "dynptr_from_mem",
    "ringbuf_reserve_dynptr",
    "ringbuf_submit_dynptr",
    "ringbuf_discard_dynptr",
    "dynptr_read",
    "dynptr_write",
    "dynptr_data",
    "tcp_raw_gen_syncookie_ipv4",
    "tcp_raw_gen_syncookie_ipv6",
    "tcp_raw_check_syncookie_ipv4",
    "tcp_raw_check_syncookie_ipv6",
    "ktime_get_tai_ns",
    "user_ringbuf_drain",
    "cgrp_storage_get",
    "cgrp_storage_delete",
];

/// The kernel's name for helper `id` (without `bpf_`), if it is one.
pub fn kernel_helper_name(id: u32) -> Option<&'static str> {
    KERNEL_HELPER_NAMES
        .get(id as usize)
        .copied()
        .filter(|_| id != 0)
}

pub const MAP_LOOKUP_ELEM: u32 = 1;
pub const MAP_UPDATE_ELEM: u32 = 2;
pub const MAP_DELETE_ELEM: u32 = 3;
pub const KTIME_GET_NS: u32 = 5;
pub const GET_CURRENT_TASK: u32 = 35;
pub const CURRENT_TASK_UNDER_CGROUP: u32 = 37;
pub const TRACE_PRINTK: u32 = 6;
pub const GET_PRANDOM_U32: u32 = 7;
pub const GET_SMP_PROCESSOR_ID: u32 = 8;
pub const TAIL_CALL: u32 = 12;
pub const REDIRECT: u32 = 23;
pub const PERF_EVENT_OUTPUT: u32 = 25;
/// `bpf_xdp_output`: an fentry/fexit program's perf output with the XDP
/// frame's bytes.
pub const XDP_OUTPUT: u32 = 121;
pub const CSUM_DIFF: u32 = 28;
pub const GET_NUMA_NODE_ID: u32 = 42;
pub const CHECK_MTU: u32 = 163;
pub const TRACE_VPRINTK: u32 = 177;
pub const XDP_ADJUST_HEAD: u32 = 44;
pub const REDIRECT_MAP: u32 = 51;
pub const XDP_ADJUST_META: u32 = 54;
pub const XDP_ADJUST_TAIL: u32 = 65;
pub const FIB_LOOKUP: u32 = 69;
pub const MAP_PUSH_ELEM: u32 = 87;
pub const MAP_POP_ELEM: u32 = 88;
pub const MAP_PEEK_ELEM: u32 = 89;
pub const SPIN_LOCK: u32 = 93;
pub const SPIN_UNLOCK: u32 = 94;
pub const JIFFIES64: u32 = 118;
pub const KTIME_GET_BOOT_NS: u32 = 125;
pub const RINGBUF_OUTPUT: u32 = 130;
pub const RINGBUF_RESERVE: u32 = 131;
pub const RINGBUF_SUBMIT: u32 = 132;
pub const RINGBUF_DISCARD: u32 = 133;
pub const RINGBUF_QUERY: u32 = 134;
pub const KTIME_GET_COARSE_NS: u32 = 160;
pub const FOR_EACH_MAP_ELEM: u32 = 164;
pub const TIMER_INIT: u32 = 169;
pub const TIMER_SET_CALLBACK: u32 = 170;
pub const TIMER_START: u32 = 171;
pub const TIMER_CANCEL: u32 = 172;
pub const TCP_RAW_GEN_SYNCOOKIE_IPV4: u32 = 204;
pub const TCP_RAW_GEN_SYNCOOKIE_IPV6: u32 = 205;
pub const TCP_RAW_CHECK_SYNCOOKIE_IPV4: u32 = 206;
pub const TCP_RAW_CHECK_SYNCOOKIE_IPV6: u32 = 207;
pub const SNPRINTF: u32 = 165;
pub const LOOP: u32 = 181;
pub const STRNCMP: u32 = 182;
pub const XDP_GET_BUFF_LEN: u32 = 188;
pub const XDP_LOAD_BYTES: u32 = 189;
pub const XDP_STORE_BYTES: u32 = 190;
pub const MAP_LOOKUP_PERCPU_ELEM: u32 = 195;
pub const KTIME_GET_TAI_NS: u32 = 208;
pub const DYNPTR_FROM_MEM: u32 = 197;
pub const RINGBUF_RESERVE_DYNPTR: u32 = 198;
pub const RINGBUF_SUBMIT_DYNPTR: u32 = 199;
pub const RINGBUF_DISCARD_DYNPTR: u32 = 200;
pub const DYNPTR_READ: u32 = 201;
pub const DYNPTR_WRITE: u32 = 202;
pub const DYNPTR_DATA: u32 = 203;
pub const USER_RINGBUF_DRAIN: u32 = 209;

pub const PROBE_READ: u32 = 4;
pub const GET_CURRENT_PID_TGID: u32 = 14;
pub const GET_CURRENT_UID_GID: u32 = 15;
pub const GET_CURRENT_COMM: u32 = 16;
pub const GET_STACKID: u32 = 27;
pub const PROBE_READ_STR: u32 = 45;
pub const GET_STACK: u32 = 67;
pub const PROBE_READ_USER: u32 = 112;
pub const PROBE_READ_KERNEL: u32 = 113;
pub const PROBE_READ_USER_STR: u32 = 114;
pub const PROBE_READ_KERNEL_STR: u32 = 115;
pub const GET_FUNC_IP: u32 = 173;
pub const GET_ATTACH_COOKIE: u32 = 174;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_line_up_with_ids() {
        assert_eq!(kernel_helper_name(MAP_LOOKUP_ELEM), Some("map_lookup_elem"));
        assert_eq!(kernel_helper_name(TAIL_CALL), Some("tail_call"));
        assert_eq!(kernel_helper_name(XDP_ADJUST_TAIL), Some("xdp_adjust_tail"));
        assert_eq!(kernel_helper_name(FIB_LOOKUP), Some("fib_lookup"));
        assert_eq!(kernel_helper_name(SPIN_LOCK), Some("spin_lock"));
        assert_eq!(
            kernel_helper_name(KTIME_GET_BOOT_NS),
            Some("ktime_get_boot_ns")
        );
        assert_eq!(kernel_helper_name(RINGBUF_OUTPUT), Some("ringbuf_output"));
        assert_eq!(
            kernel_helper_name(KTIME_GET_COARSE_NS),
            Some("ktime_get_coarse_ns")
        );
        assert_eq!(
            kernel_helper_name(FOR_EACH_MAP_ELEM),
            Some("for_each_map_elem")
        );
        assert_eq!(kernel_helper_name(LOOP), Some("loop"));
        assert_eq!(kernel_helper_name(XDP_STORE_BYTES), Some("xdp_store_bytes"));
        assert_eq!(
            kernel_helper_name(MAP_LOOKUP_PERCPU_ELEM),
            Some("map_lookup_percpu_elem")
        );
        assert_eq!(
            kernel_helper_name(KTIME_GET_TAI_NS),
            Some("ktime_get_tai_ns")
        );
        assert_eq!(kernel_helper_name(211), Some("cgrp_storage_delete"));
        assert_eq!(kernel_helper_name(0), None);
        assert_eq!(kernel_helper_name(5000), None);
    }
}
