# inject_test.rb: tracer -p on a bare Ruby process, which never heard of tracer: the agent is
# loaded into it once, in every state it can be in, for every mode; the next client finds it;
# and every refusal this machine can produce, with its exact message.
require_relative 'helper'
require 'fileutils'

class InjectTest < Minitest::Test
  include TracerTest

  # A container: its own pid, mount, IPC and network namespaces (namespace_test.rb's).
  CONTAINER = %w[unshare --fork --kill-child --pid --mount --ipc --net --mount-proc].freeze
  # A bare `ruby`: no agent on its command line, nothing in RUBYOPT (but, under Ruby::Box, what
  # keeps Ruby's warning that it is experimental off the target's stderr).
  BARE = { 'RUBYOPT' => ENV['RUBY_BOX'] == '1' ? '-W:no-experimental' : nil, 'TRACER_AGENT_INJECT' => nil }.freeze
  LOADED = /\A\*\*\* loaded tracer_agent into process (\d+) \(Ruby ([\d.]+); the process was held still ([\d.]+) ms\)\n/
  INSTEAD = "or have the app load the agent itself (require 'tracer_agent')"
  # The postponed-job queue (3.3 on) wakes an idle process with SIGCHLD; the buffer (3.1) with
  # SIGVTALRM, which no app can trap.
  QUEUE_RUBY = Gem::Version.new(RUBY_VERSION) >= Gem::Version.new('3.3')

  def bare(mode, env: {}, **opts)
    target(mode, agent: false, env: BARE.merge(env), **opts)
  end

  # The agent was loaded by this client: said once, with Ruby's version and the time the
  # process was held still.
  def assert_loaded(err, pid)
    m = LOADED.match(err[/^\*\*\* loaded.*\n(?:.|\n)*/] || '')
    assert m, "no load note in: #{err}"
    assert_equal pid, Integer(m[1])
    assert_equal RUBY_VERSION, m[2]
    assert_operator Float(m[3]), :<, 100, 'held still for long: a freeze should take well under 5 ms'
    m.post_match
  end

  # The agent's file, or under Ruby::Box the copy of it Ruby loads in a box and deletes
  # (/tmp/_ruby_box_p<pid>_<box>_+...+tracer_agent.so (deleted)).
  def agent_mappings(pid) = File.readlines("/proc/#{pid}/maps").grep(%r{[/+]tracer_agent\.so( \(deleted\))?$}).map { |l| l.split[5..].join(' ') }.uniq

  # Each state, and each with Ruby 3.3's M:N scheduler (older Rubies ignore the variable).
  # A busy process lets the loading thread have Ruby's lock a time slice at a time, a long C
  # call (a sort of 1 M integers) a call at a time, and the load needs it once per file it
  # reads: on a loaded machine that takes seconds, hence the timeouts. `load`: inside
  # Kernel#load, where the job that evaluated Ruby made Ruby 3.3 and later crash.
  %w[busy sleep queue pipe join cfunc select load].each do |mode|
    [['', {}], ['_mn_threads', { 'RUBY_MN_THREADS' => '1' }]].each do |suffix, env|
      define_method("test_loads_into_a_process_#{mode}#{suffix}") do
        t = bare(mode, env: env)
        limit = mode == 'cfunc' ? 5 * WAIT : WAIT # a sort of 1 M integers, each time the load reads a file
        out, err, status = tracer('-p', t.pid, '-e', '6 * 7', '--timeout', limit, within: 3 * limit)
        assert status.success?, "exit #{status.exitstatus}: #{err}\n--- the process (#{t.alive? ? 'alive' : t.status}):\n#{t.out}#{t.err}"
        assert_equal "=> 42\n", out
        assert_empty assert_loaded(err, t.pid)
        # The next client finds it loaded: no load, the same agent, now at its second session.
        out, err, status = tracer('-p', t.pid, '-e', '[TracerAgent.stats[:sessions], $LOADED_FEATURES.grep(/tracer_agent\.so\z/).size]',
                                  '--timeout', limit, within: 3 * limit)
        assert status.success?, err
        assert_empty err
        assert_equal "=> [2, 1]\n", out
        assert_equal 1, agent_mappings(t.pid).size
        assert_empty leftovers_for(t.pid)
        assert t.alive?
        assert_empty t.err, 'the app printed something'
      end
    end
  end

  # The README's first example, on examples/shop.rb started with a bare `ruby`, until it has
  # shown an order of each kind (its --duration 1 may pass before that on a loaded machine).
  def test_readme_first_example_on_a_process_that_never_heard_of_tracer
    t = bare('', script: File.join(ROOT, 'examples', 'shop.rb'), ready: /shop \d+ ready/)
    out, err, status = run_until('-p', t.pid, '-m', 'Order#total', 'Catalog.price(name)', [
      /^Order#total\n  Catalog\.price\(name="apple"\) <\d+\.\d+>\n  Catalog\.price\(name="fig"\) <\d+\.\d+>\nOrder#total <\d+\.\d+>\n/,
      /^  Catalog\.price\(name="kiwi"\)\n    EXCEPTION KeyError: unknown item kiwi \(#{Regexp.escape(File.join(ROOT, 'examples', 'shop.rb'))}:18\)\n/,
    ])
    assert status.success?, err
    rest = assert_loaded(err, t.pid)
    assert_equal "*** attached to process #{t.pid}\n*** detached from process #{t.pid}\n", rest
  end

  # Every mode works as on a process that required the agent itself.
  def test_trace_of_a_bare_process
    t = bare('work')
    _, err, status = run_until('-p', t.pid, '-m', 'Worker#work', /^Worker#work <\d+\.\d+>$/)
    assert status.success?, err
    assert_match(/\*\*\* attached to process #{t.pid}\n/, assert_loaded(err, t.pid))
    assert_empty t.err
  end

  def test_top_of_a_bare_process
    t = bare('work', chdir: ROOT)
    _, err, status = run_until('-p', t.pid, '--top', 'calls', '--interval', '0.2', '--json', /"method":"Worker#work"/)
    assert status.success?, err
    assert_loaded(err, t.pid)
  end

  def test_backtraces_of_a_bare_process
    t = bare('nested')
    out, err, status = tracer('-p', t.pid, '--backtraces')
    assert status.success?, err
    assert_loaded(err, t.pid)
    assert_match(/^main \(sleep\)\n.*in [`'](Object#)?inner_call'/m, out) # 3.4 says 'Object#inner_call'
    refute_match(/tracer-inject/, out)
  end

  def test_heapdump_of_a_bare_process
    Dir.mktmpdir do |dir|
      t = bare('sleep')
      file = File.join(dir, 'heap.json')
      out, err, status = tracer('-p', t.pid, '--heapdump', file)
      assert status.success?, err
      assert_loaded(err, t.pid)
      assert_match(/heap dump written to #{Regexp.escape(file)}/, out)
      assert_operator File.size(file), :>, 1000
    end
  end

  # A fork of a process tracer loaded the agent into has it: attached to as any other.
  def test_forked_workers_of_an_injected_master
    Dir.mktmpdir do |dir|
      spawn = File.join(dir, 'spawn')
      tag = "i#{rand(1 << 40)}"
      master = bare('cluster', env: { 'TAG' => tag, 'SPAWN_FILE' => spawn, 'WORKERS' => '1' })
      out, err, status = tracer('-p', master.pid, '-e', 'Process.pid')
      assert status.success?, err
      assert_equal "=> #{master.pid}\n", out
      assert_loaded(err, master.pid)
      before = master.out.scan(/^worker (\d+)$/).size
      FileUtils.touch(spawn)
      worker = Integer(wait_until(message: 'a new worker') { master.out.scan(/^worker (\d+)$/)[before]&.first })
      out, err, status = tracer('-p', worker, '-e', 'Process.pid')
      assert status.success?, err
      assert_empty err, 'the worker had the agent from its master'
      assert_equal "=> #{worker}\n", out
    end
  end

  # --ps loads the agent into every matching Ruby process.
  def test_ps_loads_into_every_worker
    Dir.mktmpdir do |dir|
      tag = "p#{rand(1 << 40)}"
      master = bare('cluster', env: { 'TAG' => tag, 'SPAWN_FILE' => File.join(dir, 'spawn') })
      workers = wait_until(message: 'two workers') { (w = master.out.scan(/^worker (\d+)$/).flatten.map(&:to_i)).size >= 2 && w }
      # --timeout: each worker answers once the agent is in, which takes seconds at load 20.
      out, err, status = tracer('--ps', "^cluster-worker-#{tag}$", '--top', 'calls', '--duration', 2, '--json', '--all', '--yes',
                                '--timeout', WAIT, within: 3 * WAIT)
      assert status.success?, err
      workers.each { |w| assert_match(/loaded tracer_agent into process #{w} /, err) }
      assert_equal workers.sort, JSON.parse(out.lines.last)['pids'].sort
    end
  end

  # From the host, by the host pid, into a container's process (its own pid, mount, IPC and
  # network namespaces) that sees the same files.
  def test_container_from_the_host
    needs_root 'a container'
    t = bare('sleep', prefix: CONTAINER)
    host = container_child(t)
    out, err, status = tracer('-p', host, '-e', 'Process.pid')
    assert status.success?, err
    assert_equal "=> 1\n", out
    assert_match(/loaded tracer_agent into process #{host} /, err)
  end

  # As the process's own user, not root (no Yama here, or Yama at 0).
  def test_as_the_process_user
    skip_unless_yama_allows_users
    t = bare('sleep', prefix: AS_NOBODY)
    out, err, status = tracer('-p', t.pid, '-e', 'Process.uid', prefix: AS_NOBODY)
    assert status.success?, err
    assert_equal "=> #{Etc.getpwnam('nobody').uid}\n", out
    assert_loaded(err, t.pid)
  end

  # ---- refusals: nothing written, one line that says why and what to do instead ----

  def test_opted_out_by_environment
    t = bare('sleep', env: { 'TRACER_AGENT_INJECT' => '0' })
    out, err, status = tracer('-p', t.pid, '-e', '1')
    assert_equal 1, status.exitstatus
    assert_empty out
    assert_equal "tracer: process #{t.pid} was started with TRACER_AGENT_INJECT=0: tracer does not load the agent " \
                 "into it; the app can still require 'tracer_agent' itself\n", err
    assert_untouched(t)
  end

  def test_no_inject_option
    t = bare('sleep')
    _, err, status = tracer('-p', t.pid, '-e', '1', '--timeout', '0.5', '--no-inject')
    assert_equal 1, status.exitstatus
    assert_equal "tracer: process #{t.pid} runs Ruby without tracer_agent: /proc/#{t.pid}/maps shows no " \
                 "tracer_agent.so, and --no-inject keeps tracer from loading it (require 'tracer_agent' " \
                 "in the app, or start it with tracer -x)\n", err
    assert_untouched(t)
  end

  def test_not_a_ruby_process
    pid = Process.spawn('sleep', '600')
    _, err, status = tracer('-p', pid, '-e', '1')
    assert_equal 1, status.exitstatus
    assert_equal "tracer: process #{pid} is no Ruby program: /proc/#{pid}/maps shows no libruby and no ruby executable\n", err
  ensure
    Process.kill('KILL', pid) rescue nil # rubocop:disable Style/RescueModifier
    Process.wait(pid) rescue nil # rubocop:disable Style/RescueModifier
  end

  def test_stopped_process
    t = bare('sleep')
    Process.kill('STOP', t.pid)
    wait_until(message: 'stopped') { File.read("/proc/#{t.pid}/stat")[/\) (\S)/, 1] == 'T' }
    _, err, status = tracer('-p', t.pid, '-e', '1')
    assert_equal 1, status.exitstatus
    assert_equal "tracer: process #{t.pid} is stopped (state T): continue it first (kill -CONT #{t.pid})\n", err
    Process.kill('CONT', t.pid)
    assert_untouched(t)
  end

  # A debugger holds it (test/apps/ptrace_holder.rb ptraces it as one): tracer cannot stop it.
  def test_process_traced_by_another
    t = bare('sleep')
    holder = IO.popen([RUBY, File.join(ROOT, 'test', 'apps', 'ptrace_holder.rb'), t.pid.to_s])
    assert_equal "holding #{t.pid}\n", holder.gets
    name = File.read("/proc/#{holder.pid}/comm").chomp
    _, err, status = tracer('-p', t.pid, '-e', '1')
    assert_equal 1, status.exitstatus
    assert_equal "tracer: process #{t.pid} is ptraced by process #{holder.pid} (#{name}): tracer cannot stop it to load " \
                 "the agent while that holds it; detach it first, #{INSTEAD}\n", err
  ensure
    if holder
      Process.kill('KILL', holder.pid)
      holder.close
    end
    assert_untouched(t) if t
  end

  # Another user's process: refused before anything is read.
  def test_foreign_user
    needs_root 'tracer runs as user nobody'
    t = bare('sleep')
    _, err, status = tracer('-p', t.pid, '-e', '1', prefix: AS_NOBODY)
    assert_equal 4, status.exitstatus
    assert_equal "tracer: permission denied: process #{t.pid} belongs to another user: run tracer as that user, or as root\n", err
    assert_untouched(t)
  end

  # A process of the same user that is not dumpable: only root may ptrace it.
  def test_not_dumpable
    skip_unless_yama_allows_users
    t = bare('undumpable', prefix: AS_NOBODY)
    _, err, status = tracer('-p', t.pid, '-e', '1', prefix: AS_NOBODY)
    assert_equal 4, status.exitstatus
    assert_equal "tracer: process #{t.pid} is not dumpable (it changed its user, or called prctl(PR_SET_DUMPABLE, 0)): " \
                 "only root may load the agent into it, #{INSTEAD}\n", err
    assert_untouched(t)
  end

  # tracer under a seccomp filter that forbids ptrace (a container's default profile does).
  def test_seccomp_on_the_client
    t = bare('sleep')
    _, err, status = tracer('-p', t.pid, '-e', '1', prefix: [RUBY, File.join(ROOT, 'test', 'apps', 'no_ptrace.rb')])
    assert_equal 4, status.exitstatus, err
    assert_equal "tracer: a seccomp filter on tracer (Seccomp: 2 in /proc/self/status: a container's default profile?) " \
                 "forbids ptrace: run tracer without it (docker: --cap-add SYS_PTRACE, or --security-opt " \
                 "seccomp=unconfined), #{INSTEAD}\n", err
    assert_untouched(t)
  end

  # Yama's ptrace_scope 1 to 3 each refuse a user's load, with its reason. Where this kernel has
  # no Yama, or its scope lets users ptrace, tracer runs in a mount namespace whose
  # /proc/sys/kernel says the scope (tracer reads it there as it would the kernel's).
  def test_yama
    real = File.exist?('/proc/sys/kernel/yama/ptrace_scope') ? Integer(File.read('/proc/sys/kernel/yama/ptrace_scope')) : 0
    scopes = real.zero? ? [1, 2, 3] : [real]
    needs_root 'to make the namespace, and to run processes as nobody' if real.zero?
    t = bare('sleep', prefix: AS_NOBODY)
    scopes.each do |scope|
      yama = real.zero? ? ['unshare', '-m', 'sh', '-c', 'mount --make-rprivate / && mount -t tmpfs tmpfs /proc/sys/kernel && ' \
                            "mkdir /proc/sys/kernel/yama && echo #{scope} >/proc/sys/kernel/yama/ptrace_scope && exec \"$@\"", 'sh'] : []
      _, err, status = tracer('-p', t.pid, '-e', '1', prefix: yama + AS_NOBODY)
      assert_equal 4, status.exitstatus, err
      assert_match(/\Atracer: kernel\.yama\.ptrace_scope is #{scope}: .* #{Regexp.escape(INSTEAD)}\n\z/, err)
    end
    assert_untouched(t)
  end

  # The files the process would run must be changeable only by root or its user.
  def test_agent_writable_by_others
    with_agent_copy do |lib|
      File.chmod(0o666, File.join(lib, 'tracer_agent', 'wrap.rb'))
      t = bare('sleep')
      _, err, status = tracer('-p', t.pid, '-e', '1', env: { 'TRACER_AGENT_LIB' => lib })
      assert_equal 1, status.exitstatus
      path = File.join(File.realpath(lib), 'tracer_agent', 'wrap.rb')
      assert_equal "tracer: the agent's #{path} is writable by anyone, who could make process #{t.pid} run anything: " \
                   "chmod go-w #{path}, #{INSTEAD}\n", err
      assert_untouched(t)
    end
  end

  def test_agent_owned_by_another_user
    needs_root "a file of user nobody's"
    with_agent_copy do |lib|
      nobody = Etc.getpwnam('nobody').uid
      File.chown(nobody, nil, File.join(lib, 'tracer_agent.rb'))
      t = bare('sleep')
      _, err, status = tracer('-p', t.pid, '-e', '1', env: { 'TRACER_AGENT_LIB' => lib })
      assert_equal 1, status.exitstatus
      path = File.join(File.realpath(lib), 'tracer_agent.rb')
      assert_equal "tracer: the agent's #{path} belongs to uid #{nobody}, neither root nor the user of process #{t.pid}, " \
                   "who would run what that uid puts there: chown it, #{INSTEAD}\n", err
      assert_untouched(t)
    end
  end

  # A process whose file system does not have the agent where tracer has it (its own mount
  # namespace, with tracer's lib hidden).
  def test_agent_not_visible_to_the_process
    needs_root 'a mount namespace'
    lib = File.realpath(AGENT_LIB)
    t = bare('sleep', prefix: ['unshare', '--mount', '--propagation', 'private', 'sh', '-c', 'mount -t tmpfs none "$0" && exec "$@"', lib])
    _, err, status = tracer('-p', t.pid, '-e', '1')
    assert_equal 1, status.exitstatus
    assert_equal "tracer: process #{t.pid} does not see the agent's #{lib}/tracer_agent.rb (its file system is another: " \
                 "a container?): mount the directory there at the same path, read-only, #{INSTEAD}\n", err
    assert_untouched(t)
  end

  # The agent is built for one Ruby; another Ruby's process is refused, not loaded with it.
  def test_agent_built_for_another_ruby
    env, other = other_ruby
    pid = Process.spawn(BARE.merge(env), other, '-e', 'sleep', out: File::NULL, err: File::NULL)
    wait_until(message: "#{other} started") { File.read("/proc/#{pid}/maps").include?('libruby') }
    version = IO.popen(env, [other, '-e', 'print RUBY_VERSION'], &:read)
    _, err, status = tracer('-p', pid, '-e', '1')
    assert_equal 1, status.exitstatus
    assert_match(/\Atracer: the agent's \S+\/tracer_agent\.so was built for libruby\S*, and process #{pid} runs Ruby #{Regexp.escape(version)} \(libruby\S*\): build the agent with that Ruby \(make agent RUBY=\.\.\.\) and set TRACER_AGENT_LIB to its lib, #{Regexp.escape(INSTEAD)}\n\z/, err)
    refute File.read("/proc/#{pid}/maps").include?('tracer_agent')
  ensure
    if pid
      Process.kill('KILL', pid)
      Process.wait(pid)
    end
  end

  # The agent loaded while the process is still in Ruby's prelude (as tracer's thread would load
  # it into a process younger than the client lets it): it waits for the prelude to end, since a
  # module prepended to Kernel before then makes a Ruby with YJIT built in (3.4-yjit, 4.0) panic
  # as the prelude ends. The prelude's `require 'did_you_mean'` finds this one first (RUBYLIB).
  # The loader requires as tracer's does (rb_require, which RubyGems' require and the lock it
  # holds while it loads this file do not see).
  def test_loaded_during_the_prelude_waits_for_it
    Dir.mktmpdir('tracer-prelude') do |dir|
      File.write(File.join(dir, 'did_you_mean.rb'), <<~RUBY)
        t = Thread.new { send(:gem_original_require, #{File.join(AGENT_LIB, 'tracer_agent').inspect}); :loaded }
        Thread.pass until t.status == 'sleep' || !t.alive?
        $in_prelude = [t.status, defined?(TracerAgent).inspect]
        $loader = t
      RUBY
      out, err, status = Open3.capture3(BARE.merge('RUBYLIB' => dir), RUBY, '-e',
                                        'p $in_prelude, $loader.value, TracerAgent.stats[:sessions]')
      assert status.success?, "#{status.inspect}: #{err}"
      assert_equal "[\"sleep\", \"nil\"]\n:loaded\n0\n", out
      assert_empty err
    end
  end

  # An idle 3.3+ process is woken with SIGCHLD, which Ruby handles itself; an app that traps
  # SIGCHLD would see its handler run for a child that did not exit: tracer does not send it,
  # and the agent loads at the app's next activity. 3.1 is woken with SIGVTALRM, which no app
  # can trap: it loads at once. Either way the app's handler never runs for nothing.
  def test_idle_process_that_traps_sigchld
    t = bare('trap_chld')
    unless QUEUE_RUBY
      out, err, status = tracer('-p', t.pid, '-e', '6 * 7')
      assert status.success?, err
      assert_equal "=> 42\n", out
      refute_match(/CHLD/, t.out, 'the app saw a SIGCHLD')
      return
    end
    _, err, status = tracer('-p', t.pid, '-e', '1', '--timeout', 1)
    assert_equal 1, status.exitstatus
    assert_equal "tracer: process #{t.pid} is idle, and it traps SIGCHLD itself, so tracer does not wake it (its " \
                 "handler would run): the agent loads at its next activity; run tracer again then (it waited 1 s)\n", err
    refute_match(/CHLD/, t.out, 'the app saw a SIGCHLD')
    # Its next activity loads it: a child of its own exits.
    Process.kill('USR1', t.pid)
    t.wait_for(/CHLD/)
    wait_until(message: 'the agent loaded') { !agent_mappings(t.pid).empty? }
    out, err, status = tracer('-p', t.pid, '-e', '6 * 7')
    assert status.success?, err
    assert_equal "=> 42\n", out
    assert_equal 1, t.out.scan(/CHLD/).size
  end

  # A main thread in a C call Ruby cannot interrupt (no unblocking function) is not signalled:
  # the call would end early. The job runs when it returns. (Once the agent is in, the attach
  # rings it with SIGURG, as it rings any process: that may end a later one early.)
  def test_c_call_outside_ruby_is_left_alone
    t = bare('csleep')
    out, err, status = tracer('-p', t.pid, '-e', '6 * 7', '--timeout', WAIT)
    assert status.success?, err
    assert_equal "=> 42\n", out
    t.wait_for(/slept: /)
    assert_match(/\Aready \d+\nslept: 0 left, 2\.\d s\n/, t.out, 'the sleep under way while the agent was queued was cut short')
  end

  # Two clients at once: one loads the agent, the other waits for that load; it loads once.
  def test_two_clients_at_once
    t = bare('sleep')
    clients = 2.times.map { client('-p', t.pid, '-e', 'Process.pid') }
    results = clients.map { |c| [c.finish, c.out, c.err] }
    results.each do |status, out, err|
      next if status.success? && out == "=> #{t.pid}\n"

      assert_match(/already traced by pid \d+/, err, 'neither an answer nor the other client at work')
    end
    assert results.any? { |status, _, _| status.success? }
    # Both may have queued a job (the second after the first ran, before its thread was named):
    # the second require finds the first's done.
    assert_includes 1..2, results.count { |_, _, err| err.include?('*** loaded tracer_agent') }
    assert_equal 1, agent_mappings(t.pid).size
    out, = tracer('-p', t.pid, '-e', '$LOADED_FEATURES.grep(/tracer_agent\.rb\z/).size')
    assert_equal "=> 1\n", out
  end

  # A short soak: loads into processes that allocate, lock, collect, fork and require, with
  # their output compared with an untraced run (test/soak/inject.rb runs 1,000).
  def test_short_soak
    out, err, status = Open3.capture3(RUBY, File.join(ROOT, 'test', 'soak', 'inject.rb'), '6')
    assert status.success?, "#{out}\n#{err}"
    assert_match(/^inject soak: 6 injections, 6 loaded, 0 failed/, out)
  end

  private

  def assert_untouched(t)
    assert t.alive?
    assert_empty agent_mappings(t.pid)
    assert_empty t.err
  end

  def with_agent_copy
    Dir.mktmpdir('tracer-agent-copy') do |dir|
      lib = File.join(dir, 'lib')
      FileUtils.cp_r(File.realpath(AGENT_LIB), lib)
      FileUtils.chmod_R('go-w', lib)
      yield lib
    end
  end

  # The container's process: unshare's child (unshare --fork).
  def container_child(t)
    wait_until(message: 'the container child') do
      File.read("/proc/#{t.pid}/task/#{t.pid}/children").split.first&.to_i
    end
  end

  def skip_unless_yama_allows_users
    scope = File.exist?('/proc/sys/kernel/yama/ptrace_scope') ? Integer(File.read('/proc/sys/kernel/yama/ptrace_scope')) : 0
    skip "kernel.yama.ptrace_scope is #{scope}: only root may ptrace here" unless scope.zero?
    skip 'needs root, to run processes as nobody' unless Process.uid.zero?
  end

  # A Ruby executable on this machine, other than the one under test, that maps a libruby of
  # another soname: the agent built for this one must not go into it.
  # [environment, ruby] of a Ruby with a libruby other than the agent's: one installed here,
  # else this Ruby over a copy of its libruby whose soname (what tracer compares, from the ELF's
  # dynamic section) names another series, the same length: the loader takes the copy by file
  # name from LD_LIBRARY_PATH. The copy lives as long as the run.
  def other_ruby
    mine = File.readlines('/proc/self/maps').grep(/libruby/).first&.split&.last
    candidates = Dir['/usr/bin/ruby[0-9]*'] + Dir['/opt/*/bin/ruby'] + ['/usr/bin/ruby']
    found = candidates.uniq.find do |r|
      next false unless File.executable?(r) && File.realpath(r) != File.realpath(RbConfig.ruby)

      lib = IO.popen([r, '-e', 'print File.readlines("/proc/self/maps").grep(/libruby/).first&.split&.last'], err: File::NULL, &:read) rescue nil # rubocop:disable Style/RescueModifier
      lib && !lib.empty? && File.basename(lib) != File.basename(mine.to_s)
    end
    return [{}, found] if found

    assert mine, "#{RbConfig.ruby} maps no libruby: a static Ruby, which this test cannot copy"
    soname = File.basename(mine)[/\Alibruby\.so\.\d+\.\d+|\Alibruby-\d+\.\d+\.so\.\d+\.\d+/] or flunk("no soname in #{mine}")
    other = soname.gsub(/\d+\.\d+/) { |v| v == v.tr('0-9', '9') ? v.tr('0-9', '8') : v.tr('0-9', '9') }
    bytes = File.binread(mine)
    assert_equal 1, bytes.scan(soname).size, "#{mine} names #{soname} once"
    dir = Dir.mktmpdir('tracer-other-ruby')
    Minitest.after_run { FileUtils.rm_rf(dir) }
    File.binwrite(File.join(dir, soname), bytes.sub(soname, other))
    [{ 'LD_LIBRARY_PATH' => dir }, RbConfig.ruby]
  end
end
