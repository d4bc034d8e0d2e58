# namespace_test.rb: attaching whatever namespaces each side has: a private /tmp, different
# TMPDIRs, a container traced from the host and from inside, and what a user who may not is told.
require_relative 'helper'

class NamespaceTest < Minitest::Test
  include TracerTest

  # A container: its own mount, pid, IPC and network namespaces. unshare forks the target (pid 1
  # in there) and kills it when unshare itself is killed.
  CONTAINER = %w[unshare --fork --kill-child --pid --mount --ipc --net --mount-proc].freeze

  def setup
    super
    needs_root 'namespaces, and processes of user nobody'
  end

  # What the machine lets these tests make, asked once per run with the commands the tests use
  # (true in place of the target). Where the kernel refuses one, the tests that need it are
  # skipped and the reason is printed once, after the run; any other failure of a probe fails
  # them. On a machine that can, every probe passes and every test runs.
  PROBES = {
    mount: { cmd: %w[unshare --mount true], what: 'a mount namespace (systemd PrivateTmp)' },
    container: { cmd: CONTAINER + ['true'], what: 'a container (mount, pid, IPC and network namespaces)' },
    user: { cmd: Nobody::AS + %w[unshare --user --map-root-user --net true],
            what: 'a user namespace made by an unprivileged user (a rootless container)' },
  }.freeze
  @refused = {}

  class << self
    attr_reader :refused

    # nil where the machine can make what probe names, else the reason it cannot.
    def refusal(probe)
      @refused.fetch(probe) do
        cmd = PROBES.fetch(probe)[:cmd]
        out, status = Open3.capture2e(*cmd)
        @refused[probe] = status.success? ? nil : why_refused(cmd, out)
      end
    end

    def why_refused(cmd, out)
      said = out.lines.last.to_s.strip
      lacks = case said
              when /cannot change root filesystem propagation: Invalid argument/
                'its / is not a mount point (a chroot?): run the tests where / is one (a VM, or ' \
                'unshare --mount and pivot_root, as script/rubies does)'
              when /Operation not permitted|Permission denied/
                if cmd.include?('--user') && !cmd.include?('--mount')
                  'the kernel refuses user namespaces to users other than root (user.max_user_namespaces ' \
                  '= 0, kernel.unprivileged_userns_clone = 0, or a chroot)'
                else
                  'root here lacks CAP_SYS_ADMIN (a container or sandbox that does not grant it)'
                end
              end
      lacks or raise Minitest::Assertion, "`#{cmd.join(' ')}` failed, and not for want of a permission: #{out}"
      "`#{cmd.join(' ')}` said \"#{said}\": #{lacks}"
    end
  end

  # Skips the test where the kernel refuses what it needs, saying why (and once, after the run).
  def needs(probe)
    why = self.class.refusal(probe) or return
    NamespaceTest.not_run(probe, name)
    skip "needs #{PROBES[probe][:what]}, which this machine cannot make: #{why}"
  end

  def self.not_run(probe, test)
    (@not_run ||= Hash.new { |h, k| h[k] = [] })[probe] << test
    @reported ||= Minitest.after_run do
      @not_run.each do |p, tests|
        warn "\nNamespaceTest: #{tests.size} #{tests.size == 1 ? 'test' : 'tests'} not run on this machine " \
             "(#{tests.sort.join(', ')}): #{tests.size == 1 ? 'it needs' : 'they need'} #{PROBES[p][:what]}, " \
             "and #{refused[p]}"
      end
    end
  end

  # systemd's PrivateTmp: the target's /tmp is a directory of its own, which the client's /tmp
  # is not. Attaching, tracing and a heap dump into the client's /tmp all work.
  def test_private_tmp
    needs :mount
    from = outside_tmp
    Dir.mktmpdir do |private_tmp|
      t = target('work', prefix: ['unshare', '-m', 'sh', '-c', 'mount --bind "$0" /tmp && exec "$@"', private_tmp],
                         lib: from ? Checkout.path(from, AGENT_LIB) : AGENT_LIB, script: from ? Checkout.path(from, TARGET) : TARGET)
      assert_equal File.stat(private_tmp).ino, File.stat("/proc/#{t.pid}/root/tmp").ino, 'the target sees its own /tmp'
      check_eval_and_trace(t.pid, { 'Dir.children("/tmp").size' => '0' })
      check_heapdump(t.pid, File.join(Dir.tmpdir, "tracer-ns-test-#{t.pid}.json"))
      assert_empty leftovers_for(t.pid)
      assert_empty Dir.children(private_tmp)
    end
  end

  # Each side's TMPDIR is its own; a default heap dump goes to the client's.
  def test_different_tmpdirs
    Dir.mktmpdir do |theirs|
      Dir.mktmpdir do |ours|
        t = target('work', env: { 'TMPDIR' => theirs })
        check_eval_and_trace(t.pid, { 'ENV["TMPDIR"]' => theirs.inspect }, env: { 'TMPDIR' => ours })
        out, err, status = tracer('-p', t.pid, '--heapdump', env: { 'TMPDIR' => ours })
        assert status.success?, err
        dump = out[/^heap dump written to (\S+) /, 1]
        assert_equal ours, File.dirname(dump)
        assert_match(/\Atracer-heap-#{t.pid}-\d{8}-\d{6}\.json\z/, File.basename(dump))
        assert_empty Dir.children(theirs)
        assert_empty leftovers_for(t.pid)
      end
    end
  end

  # rbspy and py-spy's way: root on the host names the process by its host pid.
  def test_container_traced_from_the_host
    needs :container
    t = target('work', prefix: CONTAINER)
    host, inside = container_pids(t)
    assert_equal 1, inside
    check_eval_and_trace(host, { 'Process.pid' => '1' })
    check_heapdump(host, File.join(Dir.tmpdir, "tracer-ns-test-#{host}.json"))
    assert_empty leftovers_for(inside, host: host)
    assert_empty leftovers_for(host)
  end

  # tracer inside the container, with the pid the container gives the process.
  def test_client_inside_the_container
    needs :container
    t = target('work', prefix: CONTAINER)
    host, inside = container_pids(t)
    check_eval_and_trace(inside, { 'Process.pid' => '1' }, prefix: ['nsenter', '-t', host.to_s, '-m', '-i', '-n', '-p', '--'])
    assert_empty leftovers_for(inside, host: host)
  end

  # A user who is not root cannot reach into a container, and is told so, not left waiting.
  def test_user_cannot_attach_to_roots_process_in_a_container
    needs :container
    t = target('sleep', prefix: CONTAINER)
    host, inside = container_pids(t)
    out, err, status = tracer('-p', host, '-e', '1', prefix: AS_NOBODY)
    assert_equal 4, status.exitstatus, err
    assert_equal "tracer: permission denied: process #{host} belongs to another user and is in another pid " \
                 "namespace (a container?): attaching needs root\n", err
    assert_empty out
    assert_empty leftovers_for(inside, host: host)
  end

  # A process of nobody's own, in a user and network namespace of its own (`unshare -rn`, as a
  # rootless container runs): nobody may signal it, but not enter its network namespace; and
  # root, whom that user namespace does not map, would look like a stranger to its agent.
  def test_user_and_network_namespace_of_a_user_process
    needs :user
    t = target('sleep', prefix: AS_NOBODY + %w[unshare --user --map-root-user --net])
    out, err, status = tracer('-p', t.pid, '-e', '1', prefix: AS_NOBODY)
    assert_equal 4, status.exitstatus, err
    assert_equal "tracer: process #{t.pid} is in another network namespace (a container?): attaching needs root\n", err
    assert_empty out
    _, err, status = tracer('-p', t.pid, '-e', '1')
    assert_equal 4, status.exitstatus, err
    assert_match(/\Atracer: process #{t.pid} is in another user namespace \(a rootless container\?\) that has no mapping for uid 0, so its agent cannot trust tracer: run tracer inside that namespace\n\z/, err)
    assert_empty leftovers_for(t.pid)
    # In its namespaces it works: there, nobody is the root the namespace maps.
    out, err, status = tracer('-p', t.pid, '-e', 'Process.pid', prefix: AS_NOBODY + ['nsenter', '--preserve-credentials', '-t', t.pid.to_s, '-U', '-n', '--'])
    assert status.success?, err
    assert_equal "=> #{t.pid}\n", out
  end

  # The same process without the agent: each client that would be refused after the load is
  # refused before it (issue 43), and the process is left as it was.
  def test_user_namespace_refused_before_the_load
    needs :user
    t = target('sleep', agent: false, env: { 'RUBYOPT' => nil, 'TRACER_AGENT_INJECT' => nil },
                        prefix: AS_NOBODY + %w[unshare --user --map-root-user --net])
    _, err, status = tracer('-p', t.pid, '-e', '1')
    assert_equal 4, status.exitstatus, err
    assert_equal "tracer: process #{t.pid} is in another user namespace (a rootless container?) that has no mapping " \
                 "for uid 0, so its agent cannot trust tracer: run tracer inside that namespace\n", err
    refute File.read("/proc/#{t.pid}/maps").include?('tracer_'), 'the agent was loaded, then the attach refused'
    _, err, status = tracer('-p', t.pid, '-e', '1', prefix: AS_NOBODY)
    assert_equal 4, status.exitstatus, err
    assert_equal "tracer: process #{t.pid} is in another network namespace (a container?): attaching needs root\n", err
    refute File.read("/proc/#{t.pid}/maps").include?('tracer_'), 'the agent was loaded, then the attach refused'
    assert_empty leftovers_for(t.pid)
  end

  private

  # Where the target of test_private_tmp runs from: nil for the checkout, or, when it is under
  # /tmp (a clone in /tmp), which the private /tmp would hide, a copy of it in /var/tmp (a
  # PrivateTmp service's own /var/tmp is private too, but this target keeps the machine's).
  def outside_tmp
    return unless [ROOT, AGENT_LIB].any? { |p| Checkout.under_tmp?(p) }

    skip "the Ruby under test, #{RUBY}, is under /tmp, which the target's private /tmp hides" if Checkout.under_tmp?(RUBY)
    base = ['/var/tmp', '/dev/shm'].find { |d| File.directory?(d) && File.writable?(d) && !Checkout.under_tmp?(d) } or
      skip 'the checkout is under /tmp, which the target\'s private /tmp hides, and neither /var/tmp nor /dev/shm ' \
           'is a writable directory elsewhere to run it from a copy'
    @outside_tmp ||= Checkout.copy('tracer-ns-test', base)
  end

  # The target's pid here (the child unshare forked) and inside (the last NSpid field).
  def container_pids(target)
    host = wait_until(message: 'the contained process') do
      File.read("/proc/#{target.pid}/task/#{target.pid}/children").split.first&.to_i
    end
    [host, Integer(File.read("/proc/#{host}/status")[/^NSpid:(.*)$/, 1].split.last)]
  end

  # -e CODE prints what expect says for each; -m sees Worker#work called.
  def check_eval_and_trace(pid, expect, env: {}, prefix: [])
    expect.each do |code, value|
      out, err, status = tracer('-p', pid, '-e', code, env: env, prefix: prefix)
      assert status.success?, err
      assert_equal "=> #{value}\n", out
    end
    out, err, status = tracer('-p', pid, '-m', 'Worker#work', '--duration', '0.5', env: env, prefix: prefix)
    assert status.success?, err
    assert_match(/^Worker#work <[\d.]+>$/, out)
  end

  def check_heapdump(pid, path)
    out, err, status = tracer('-p', pid, '--heapdump', path)
    assert status.success?, err
    assert_equal "heap dump written to #{path} (#{File.size(path)} bytes)\n", out
    assert_equal 0o600, File.stat(path).mode & 0o777
    File.foreach(path) { |l| JSON.parse(l) }
  ensure
    FileUtils.rm_f(path)
  end
end
