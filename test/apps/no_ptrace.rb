# no_ptrace.rb CMD [ARG...]: runs CMD under a seccomp filter that answers ptrace,
# process_vm_readv and process_vm_writev with EPERM, as Docker's default profile does for a
# container without CAP_SYS_PTRACE. x86-64 only (the system call numbers are its).
require 'fiddle'

PR_SET_SECCOMP = 22
PR_SET_NO_NEW_PRIVS = 38
SECCOMP_MODE_FILTER = 2
AUDIT_ARCH_X86_64 = 0xc000003e
LD_W_ABS = 0x20 # BPF_LD | BPF_W | BPF_ABS
JEQ_K = 0x15    # BPF_JMP | BPF_JEQ | BPF_K
RET_K = 0x06    # BPF_RET | BPF_K
ALLOW = 0x7fff0000
DENY = 0x00050000 | 1 # SECCOMP_RET_ERRNO | EPERM
PTRACE = 101
PROCESS_VM_READV = 310
PROCESS_VM_WRITEV = 311

# struct sock_filter { u16 code; u8 jt, jf; u32 k; }: seccomp_data's arch at 4, nr at 0.
insns = [
  [LD_W_ABS, 0, 0, 4],
  [JEQ_K, 1, 0, AUDIT_ARCH_X86_64],
  [RET_K, 0, 0, ALLOW],
  [LD_W_ABS, 0, 0, 0],
  [JEQ_K, 3, 0, PTRACE],
  [JEQ_K, 2, 0, PROCESS_VM_READV],
  [JEQ_K, 1, 0, PROCESS_VM_WRITEV],
  [RET_K, 0, 0, ALLOW],
  [RET_K, 0, 0, DENY]
]
filter = insns.map { |insn| insn.pack('SCCL') }.join
# struct sock_fprog { unsigned short len; struct sock_filter *filter; }
fprog = [insns.size, Fiddle::Pointer[filter].to_i].pack('Sx6Q')
prctl = Fiddle::Function.new(Fiddle::Handle::DEFAULT['prctl'], [Fiddle::TYPE_INT] + [Fiddle::TYPE_LONG] * 4, Fiddle::TYPE_INT)
abort 'no_ptrace: PR_SET_NO_NEW_PRIVS failed' unless prctl.call(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0).zero?
abort 'no_ptrace: PR_SET_SECCOMP failed' unless prctl.call(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, Fiddle::Pointer[fprog].to_i, 0, 0).zero?
exec(*ARGV)
