# sandbox_test.rb: a process that a seccomp filter, a limit, or a process still booting would
# make the agent break (or break the process) is refused before anything is written into it,
# with the reason; one whose filter lets the agent's calls through (Docker's default profile,
# systemd's @system-service, no-new-privileges alone) is traced as any other (issue 43).
require_relative 'helper'

class SandboxTest < Minitest::Test
  include TracerTest

  BARE = { 'RUBYOPT' => nil, 'TRACER_AGENT_INJECT' => nil }.freeze
  # Prints a tick every 50 ms: the test sees it go on after tracer is done with it.
  TICKING = '$stdout.sync = true; puts "ready #{$$}"; i = 0; loop { sleep 0.05; puts "tick #{i += 1}" }' # rubocop:disable Lint/InterpolationCheck
  # x86-64's system call numbers, by name, from the kernel's header.
  NR = File.read('/usr/include/x86_64-linux-gnu/asm/unistd_64.h').scan(/^#define __NR_(\w+) (\d+)$/).to_h { |n, v| [n, Integer(v)] }
  # What Docker's default profile refuses (its documentation's list), with EPERM; clone only
  # with a namespace flag; clone3 with ENOSYS (glibc then uses clone); everything else allowed.
  DOCKER_DENIED = %w[acct add_key bpf clock_adjtime clock_settime create_module delete_module finit_module
                     get_kernel_syms get_mempolicy init_module ioperm iopl kcmp kexec_file_load kexec_load keyctl
                     lookup_dcookie mbind mount move_pages name_to_handle_at nfsservctl open_by_handle_at
                     perf_event_open pivot_root process_vm_readv process_vm_writev ptrace query_module quotactl
                     reboot request_key set_mempolicy setns settimeofday swapon swapoff sysfs _sysctl umount2
                     unshare uselib userfaultfd ustat vm86 vm86old].freeze
  CLONE_NEW_FLAGS = 0x7E020000 # CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET

  def self.helper_dir
    @helper_dir ||= Dir.mktmpdir('tracer-sandbox').tap do |d|
      File.chmod(0o755, d)
      out, status = Open3.capture2e('cc', '-O2', '-Wall', '-o', File.join(d, 'seccomp_exec'), File.join(ROOT, 'test', 'apps', 'seccomp_exec.c'))
      raise "cannot build seccomp_exec: #{out}" unless status.success?

      Minitest.after_run { FileUtils.rm_rf(d) }
    end
  end

  def seccomp(default, *rules) = [File.join(self.class.helper_dir, 'seccomp_exec'), default, *rules, '--']

  def ticking(prefix = [], env: {}, agent: false)
    target(TICKING, agent: agent, script: '-e', env: BARE.merge(env), prefix: prefix)
  end

  # ---- each kind of filter on a call the agent needs: refused, the process untouched ----

  def test_filter_that_kills_the_process_on_socket
    t = ticking(seccomp('allow', "#{NR['socket']}=kill_process"))
    assert_refused_seccomp(t, 'socket(AF_UNIX, SOCK_STREAM) (the agent\'s connection to tracer) with kill process (SIGSYS)',
                           'that call would kill the process')
  end

  def test_filter_that_kills_the_thread_on_msgget
    t = ticking(seccomp('allow', "#{NR['msgget']}=kill_thread"))
    assert_refused_seccomp(t, 'msgget (the agent\'s message queue) with kill thread (SIGSYS)',
                           'that call would kill the thread that makes it, and leave the app hung')
  end

  def test_filter_that_fails_msgget_with_an_error
    t = ticking(seccomp('allow', "#{NR['msgget']}=errno:1"))
    assert_refused_seccomp(t, 'msgget (the agent\'s message queue) with errno 1 (EPERM)',
                           'that call would fail, and the agent could not work')
  end

  # Arguments count: a filter that kills only Unix sockets refuses the agent's; one that kills
  # only Internet sockets lets it through. (A filter on clone's flags cannot be tried on a whole
  # process here: Ruby 3.3 and later start a thread as they boot; test_seccomp.c runs one.)
  def test_filter_on_a_socket_family
    t = ticking(seccomp('allow', "#{NR['socket']}/0/0xffffffff/1=kill_process"))
    assert_refused_seccomp(t, 'socket(AF_UNIX, SOCK_STREAM) (the agent\'s connection to tracer) with kill process (SIGSYS)',
                           'that call would kill the process')
    assert_traced(ticking(seccomp('allow', "#{NR['socket']}/0/0xffffffff/2=kill_process")))
  end

  # An app that loaded the agent itself makes the same calls when rung: its filter is read
  # before the doorbell, and the process is not rung.
  def test_filter_on_a_process_that_loaded_the_agent_itself
    t = ticking(seccomp('allow', "#{NR['socket']}=kill_process"), agent: true)
    assert File.read("/proc/#{t.pid}/maps").include?('tracer_agent.so')
    _, err, status = tracer('-p', t.pid, '-e', '1', '--timeout', 5)
    assert_equal 1, status.exitstatus, err
    assert_equal "tracer: process #{t.pid} runs under a seccomp filter (thread #{t.pid}'s) that answers socket(AF_UNIX, " \
                 "SOCK_STREAM) (the agent's connection to tracer) with kill process (SIGSYS): tracer does not attach " \
                 "to it: that call would kill the process\n", err
    assert_ticks_on_loaded(t)
  end

  # A user who may ptrace the process but not read its filter (only root can): refused, with why.
  def test_filter_unreadable_without_root
    scope = File.exist?('/proc/sys/kernel/yama/ptrace_scope') ? Integer(File.read('/proc/sys/kernel/yama/ptrace_scope')) : 0
    skip "kernel.yama.ptrace_scope is #{scope}: only root may ptrace here" unless scope.zero?
    t = ticking(AS_NOBODY + seccomp('allow', "#{NR['socket']}=kill_process"))
    _, err, status = tracer('-p', t.pid, '-e', '1', '--timeout', 5, prefix: AS_NOBODY)
    assert_equal 4, status.exitstatus, err
    assert_equal "tracer: process #{t.pid} runs under a seccomp filter (Seccomp_filters: 1 in /proc/#{t.pid}/status), " \
                 'which only root can read (CAP_SYS_ADMIN, tracer itself unfiltered): tracer cannot tell whether it ' \
                 "would kill the process for a call the agent makes, so it does not load the agent into it; run tracer as root\n", err
    assert_ticks_on(t)
  end

  # Root without CAP_SYS_ADMIN (a container's root) may ptrace but not read the filter either.
  def test_filter_unreadable_without_cap_sys_admin
    t = ticking(seccomp('allow', "#{NR['socket']}=kill_process"))
    _, err, status = tracer('-p', t.pid, '-e', '1', '--timeout', 5, prefix: %w[setpriv --bounding-set=-sys_admin --inh-caps=-sys_admin])
    assert_equal 4, status.exitstatus, err
    assert_equal "tracer: process #{t.pid} runs under a seccomp filter (Seccomp_filters: 1 in /proc/#{t.pid}/status), " \
                 'which only root can read (CAP_SYS_ADMIN, tracer itself unfiltered): tracer cannot tell whether it ' \
                 'would kill the process for a call the agent makes, so it does not load the agent into it; tracer runs ' \
                 "as root without CAP_SYS_ADMIN (a container?): give it that capability, or run it from the host\n", err
    assert_ticks_on(t)
  end

  # ---- filters that let the agent's calls through: traced as any process ----

  def test_docker_default_profile
    rules = ["#{NR['clone']}/0/#{CLONE_NEW_FLAGS}/0=allow", "#{NR['clone']}=errno:1", "#{NR['clone3']}=errno:38"] +
            DOCKER_DENIED.filter_map { |n| NR[n] && "#{NR[n]}=errno:1" }
    assert_traced(ticking(seccomp('allow', *rules)))
  end

  # systemd's SystemCallFilter=@system-service: only what it lists, anything else kills.
  def test_systemd_system_service
    names = File.readlines(File.join(ROOT, 'test', 'apps', 'system-service.txt'), chomp: true).reject { |l| l.start_with?('#') }
    assert_traced(ticking(seccomp('kill_process', *names.filter_map { |n| NR[n] && "#{NR[n]}=allow" })))
  end

  # no-new-privileges alone (systemd's NoNewPrivileges=, setpriv --no-new-privs) breaks nothing.
  def test_no_new_privs
    t = ticking(%w[setpriv --no-new-privs])
    assert_match(/^NoNewPrivs:\s+1$/, File.read("/proc/#{t.pid}/status"))
    assert_traced(t)
  end

  # ---- limits ----

  # ulimit -u for a user of its own, at the threads the process runs: the agent's could not
  # start. (Set from inside: a Ruby started under `ulimit -u 1` may not even boot, 3.3 on.)
  def test_process_limit
    uid = 61_000 + rand(3000)
    at_limit = 'Process.setrlimit(:NPROC, File.read("/proc/self/status")[/^Threads:\s+(\d+)/, 1].to_i); ' + TICKING
    t = target(at_limit, agent: false, script: '-e', env: BARE, prefix: ['setpriv', "--reuid=#{uid}", "--regid=#{uid}", '--clear-groups'])
    limit = Integer(File.read("/proc/#{t.pid}/limits")[/^Max processes\s+(\d+)/, 1])
    _, err, status = tracer('-p', t.pid, '-e', '1', '--timeout', 5)
    assert_equal 1, status.exitstatus, err
    assert_match(/\Atracer: process #{t.pid} is at its user's limit: uid #{uid} may run #{limit} processes and threads \(RLIMIT_NPROC, ulimit -u\) and runs #{limit} already, and the agent needs up to 4 more threads, so tracer does not load the agent into it; raise the limit \(prlimit --pid #{t.pid} --nproc=#{limit + 20}\) and run tracer again\n\z/, err)
    assert_ticks_on(t)
  end

  # Every descriptor it may open is open.
  def test_descriptor_limit
    full = 'Process.setrlimit(:NOFILE, 64); $ios = []; loop { $ios << File.open("/dev/null") } rescue nil; ' + TICKING
    t = target(full, agent: false, script: '-e', env: BARE)
    _, err, status = tracer('-p', t.pid, '-e', '1', '--timeout', 5)
    assert_equal 1, status.exitstatus, err
    assert_equal "tracer: process #{t.pid} has 64 of the 64 file descriptors it may open in use (RLIMIT_NOFILE, ulimit -n), " \
                 'and the agent needs up to 8 more, so tracer does not load the agent into it; raise the limit ' \
                 "(prlimit --pid #{t.pid} --nofile=136) and run tracer again\n", err
    assert_ticks_on(t)
  end

  # ---- a process still booting ----

  # Attached to from its first instants on: each waits for its VM to be made, then loads (in
  # Ruby's prelude, the agent waits for it to end: lib/tracer_agent.rb), and the process runs on
  # (a Ruby with YJIT built in, given a module prepended to Kernel in its prelude, panicked as
  # the prelude ended): a second client finds it alive.
  def test_process_still_booting
    12.times do |i|
      pid = Process.spawn(BARE, RUBY, '-e', 'sleep', out: File::NULL, err: File::NULL)
      begin
        sleep 0.025 * i
        # A Ruby still booting on a loaded machine can take more than the default 5 s to have
        # its VM made, then the agent required and listening (3.4 with YJIT, load 10: it did).
        out, err, status = tracer('-p', pid, '-e', '6 * 7', '--timeout', 60)
        assert status.success?, "attached #{0.025 * i} s after the spawn: #{err}"
        assert_equal "=> 42\n", out
        out, err, = tracer('-p', pid, '-e', 'RUBY_VERSION', '--timeout', 60)
        assert_equal "=> #{RUBY_VERSION.inspect}\n", out, err
      ensure
        Process.kill('KILL', pid)
        Process.wait(pid)
      end
    end
  end

  private

  def assert_refused_seccomp(t, answers, because)
    _, err, status = tracer('-p', t.pid, '-e', '1', '--timeout', 5)
    assert_equal 1, status.exitstatus, err
    assert_equal "tracer: process #{t.pid} runs under a seccomp filter (thread #{t.pid}'s) that answers #{answers}: " \
                 "tracer does not load the agent into it: #{because}\n", err
    assert_ticks_on(t)
  end

  # Alive, nothing of tracer in it, and still at work.
  def assert_ticks_on(t)
    refute File.read("/proc/#{t.pid}/maps").include?('tracer_'), 'something of tracer was loaded'
    seen = t.out.scan(/^tick/).size
    wait_until(message: 'the process to go on ticking') { t.out.scan(/^tick/).size >= seen + 3 }
    assert t.alive?
    assert_empty t.err
  end

  def assert_traced(t)
    out, err, status = tracer('-p', t.pid, '-e', '6 * 7')
    assert status.success?, err
    assert_equal "=> 42\n", out
    assert_match(/\A\*\*\* loaded tracer_agent into process #{t.pid} /, err)
    out, err, status = tracer('-p', t.pid, '--top', 'calls', '--duration', 1, '--json')
    assert status.success?, err
    refute_empty out
    assert_ticks_on_loaded(t)
  end

  def assert_ticks_on_loaded(t)
    seen = t.out.scan(/^tick/).size
    wait_until(message: 'the process to go on ticking') { t.out.scan(/^tick/).size >= seen + 3 }
    assert t.alive?
    assert_empty t.err
  end
end
