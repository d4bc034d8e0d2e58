# attach_test.rb: attaching in every state a target can be in, and every way attaching can fail.
require_relative 'helper'

class AttachTest < Minitest::Test
  include TracerTest

  # Each state, and each with Ruby 3.3's M:N thread scheduler on (RUBY_MN_THREADS=1; older
  # Rubies ignore it and run their usual threads).
  %w[busy sleep pipe queue select cfunc join].each do |mode|
    [['', {}], ['_mn_threads', { 'RUBY_MN_THREADS' => '1' }]].each do |suffix, env|
      define_method("test_attach_while_#{mode}#{suffix}") do
        t = target(mode, env: env)
        # The agent answers between two C calls of the cfunc target (a sort of 1 M integers),
        # which a loaded machine makes take longer than the default --timeout of 5 s.
        out, err, status = tracer('-p', t.pid, '-e', '6 * 7', '--timeout', WAIT)
        assert status.success?, "exit #{status.exitstatus}: #{err}"
        assert_equal "=> 42\n", out
        assert_empty leftovers_for(t.pid)
        assert t.alive?
      end
    end
  end

  def test_missing_pid
    pid = Process.spawn('true')
    Process.wait(pid)
    out, err, status = tracer('-p', pid, '-e', '1')
    refute status.success?
    assert_match(/no such process #{pid}/, err)
    assert_empty out
    assert_empty leftovers_for(pid)
  end

  # --no-inject: tracer does not load the agent itself (inject_test.rb), and says at once, from
  # the process's maps, what is missing, not after --timeout (30 s here: a wait would fail).
  def test_process_without_agent
    t = target('sleep', agent: false)
    started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    _, err, status = tracer('-p', t.pid, '-e', '1', '--timeout', '30', '--no-inject', within: 25)
    assert_operator Process.clock_gettime(Process::CLOCK_MONOTONIC) - started, :<, 5
    assert_equal 1, status.exitstatus
    assert_equal "tracer: process #{t.pid} runs Ruby without tracer_agent: /proc/#{t.pid}/maps shows no " \
                 "tracer_agent.so, and --no-inject keeps tracer from loading it (require 'tracer_agent' " \
                 "in the app, or start it with tracer -x)\n", err
    assert_empty leftovers_for(t.pid)
    assert t.alive?
  end

  def test_process_that_is_no_ruby
    pid = spawn('sleep', '1000')
    _, err, status = tracer('-p', pid, '-e', '1', '--timeout', '30', within: 25)
    assert_equal 1, status.exitstatus
    assert_equal "tracer: process #{pid} is no Ruby program: /proc/#{pid}/maps shows no libruby and no ruby executable\n", err
    assert_empty leftovers_for(pid)
  ensure
    Process.kill('KILL', pid) if pid
    Process.wait(pid) if pid
  end

  def test_malformed_spec_is_rejected_before_attaching
    t = target('sleep')
    ['Foo#', 'foo#bar', '#bar', 'Foo#bar(', 'Foo::#x', 'Foo#bar)', 'Foo#  '].each do |spec|
      next if spec == 'Foo#' # all methods of Foo: valid

      _, err, status = tracer('-p', t.pid, '-m', spec)
      assert_equal 2, status.exitstatus, "#{spec}: #{err}"
      assert_match(/invalid method spec/, err)
    end
    assert_empty leftovers_for(t.pid)
  end

  def test_foreign_user_cannot_attach
    skip_unless_root_with_nobody
    t = target('sleep')
    out, err, status = tracer('-p', t.pid, '-e', '1', prefix: AS_NOBODY)
    refute status.success?
    assert_match(/permission denied/, err)
    assert_empty out
    assert_empty leftovers_for(t.pid)
  end

  # A second client that wants the wrappers is told who holds them, and what it can run beside
  # them; an eval runs beside them.
  def test_second_client_is_told_who_traces
    t = target('work')
    first = client('-p', t.pid, '-m', 'Worker#work')
    first.wait_for(/attached/)
    _, err, status = tracer('-p', t.pid, '-m', 'Worker#helper')
    assert_equal 1, status.exitstatus
    assert_equal "tracer: process #{t.pid}: its method wrappers and hooks are in use by pid #{first.pid} (tracer -m); " \
                 "tracer can run --profile, -e, -i, backtraces and heap dumps beside it\n", err
    out, err, status = tracer('-p', t.pid, '-e', '6 * 7')
    assert status.success?, err
    assert_equal "=> 42\n", out
    first.wait_for(/Worker#work/)
    first.signal('INT')
    assert first.finish.success?
  end

  def test_client_sigkill_then_reattach
    t = target('work')
    c = client('-p', t.pid, '-f')
    c.wait_for(/Worker#work/)
    c.kill
    out = wait_until(message: 'a new attach') do
      o, _e, s = tracer('-p', t.pid, '-e', 'TracerAgent.attached?')
      o if s.success?
    end
    assert_equal "=> true\n", out # attached: by this very eval client
    assert_empty leftovers_for(t.pid)
  end

  # The agent's I/O thread is there while a client is attached, under a name an
  # operator can tell apart (top -H, ps -L), and gone once the client detached.
  def test_the_agents_thread_lives_as_long_as_the_session
    t = target('work')
    names = -> { Dir.glob("/proc/#{t.pid}/task/*/comm").map { |f| File.read(f).chomp rescue nil } } # rubocop:disable Style/RescueModifier
    refute_includes names.(), 'tracer-io'
    c = client('-p', t.pid, '-m', 'Worker#work')
    c.wait_for(/Worker#work/)
    assert_equal 1, names.().count('tracer-io'), names.().inspect
    c.signal('INT')
    assert c.finish.success?
    wait_until(message: "the agent's thread to end after the detach") { !names.().include?('tracer-io') }
  end

  private

  def skip_unless_root_with_nobody
    skip 'needs root' unless Process.uid.zero?
  end
end
