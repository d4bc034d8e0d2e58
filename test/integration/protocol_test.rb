# protocol_test.rb: hostile bytes on every channel: a broken agent (test/apps/fake_agent.rb) must
# get a protocol error from the client, never a crash; garbage in a target's queue and a
# malformed command must leave the real agent and its application unharmed.
require_relative 'helper'
require_relative 'fake_client'

class ProtocolTest < Minitest::Test
  include TracerTest
  include FakeClient

  FAKE_AGENT = File.join(ROOT, 'test', 'apps', 'fake_agent.rb')

  # (a) WELCOME, half a message, close; (b) a string of 4 GiB announced; (c) no message at all.
  %w[truncated huge garbage].each do |mode|
    define_method("test_client_reports_#{mode}_message_as_protocol_error") do
      t = target(mode, agent: false, script: FAKE_AGENT)
      # --no-inject: the fake agent, a Ruby program, answers for itself.
      out, err, status = tracer('-p', t.pid, '-e', '1', '--timeout', '10', '--no-inject')
      assert status.exited?, "client killed by a signal: #{status.inspect}\n#{err}"
      assert_equal 1, status.exitstatus, err
      assert_match(/^tracer: protocol error from process #{t.pid}: /, err)
      assert_empty out
      t.wait_for(/sent #{mode}/)
      assert_empty leftovers_for(t.pid)
    end
  end

  def test_garbage_in_the_queue_is_counted_and_ignored
    t = target('sleep')
    q = SysV.create(t.pid)
    rng = Random.new(7)
    # Sizes around the hello's, empty, the largest allowed; hello's mtype or not.
    sizes = [0, 1, SysV::HELLO_SIZE - 1, SysV::HELLO_SIZE, SysV::HELLO_SIZE + 1, 8192]
    100.times do |i|
      body = rng.bytes(sizes.fetch(i) { rng.rand(0..300) })
      body[0, 4] = [SysV::HELLO_MAGIC].pack('L<') if i.odd? && body.bytesize >= 4
      mtype = i.even? ? 1 : rng.rand(2..1_000_000)
      wait_until(message: 'room in the queue') { SysV.send(q, mtype, body) || (Process.kill('URG', t.pid) && false) }
    end
    5.times do
      Process.kill('URG', t.pid)
      sleep 0.02
    end
    assert t.alive?

    out, err, status = tracer('-p', t.pid, '-e', 'TracerAgent.ignored_messages')
    assert status.success?, err
    assert_match(/\A=> \d+\n\z/, out)
    # Every one was read before the client's own hello (the queue is first in, first out).
    assert_equal 100, out[/\d+/].to_i
    out, err, status = tracer('-p', t.pid, '-e', '1')
    assert status.success?, err
    assert_equal "=> 1\n", out
    assert t.alive?
    assert_empty leftovers_for(t.pid)
  ensure
    SysV.remove(q) if q
  end

  # A client whose command passes for a TOP but holds a prefix Ruby cannot take as a C string:
  # the agent must answer a protocol error, not let StringValueCStr raise in its thread.
  def test_agent_answers_malformed_command_with_protocol_error
    t = target('sleep')
    reply = fake_client(t.pid) do |sock|
      sock.write(MiniPack.pack([1, PROTOCOL_VERSION, Process.pid]))
      sock.write(MiniPack.pack([5, 0, 1000, 0, [false, ["/app\0/x"], []]]))
      read_all(sock)
    end
    assert_includes reply, "\x93\x41\x05".b, 'no ERROR/TRC_ERR_PROTOCOL reply'
    out, err, status = tracer('-p', t.pid, '-e', '1')
    assert status.success?, err
    assert_equal "=> 1\n", out
    assert t.alive?
    refute_match(/terminated with exception|ArgumentError/, t.err)
  end

  # The hook evaluates -m expressions in the app's thread; one that waits lets the agent thread
  # detach meanwhile (hooks off, ring and config freed): the hook must notice, not write into them.
  def test_detach_while_an_expression_waits
    t = target('work')
    out, err, status = tracer('-p', t.pid, '-m', 'Worker#work(sleep(1))', '--duration', '0.3')
    assert status.success?, err
    assert_match(/detached from process #{t.pid}/, err)
    assert_empty out
    sleep 1.5 # the hook wakes up after the detach
    assert t.alive?, t.err
    refute_match(/\[BUG\]/, t.err)
    assert_equal "=> 1\n", tracer('-p', t.pid, '-e', '1').first
  end

  # An expression's exception is shown; one whose #message raises too must not reach the app.
  def test_expression_whose_exception_message_raises
    t = target('work')
    code = 'Worker#work(raise(Class.new(StandardError) { def message = raise("no") }))'
    out, err, status = tracer('-p', t.pid, '-m', code, '--duration', '0.3')
    assert status.success?, err
    assert_match(/^Worker#work\(.*=#<exception \(its message raised too\)>\)/, out)
    sleep 0.2
    assert t.alive?, t.err
    refute_match(/RuntimeError/, t.err)
  end

  # A client of protocol 2 listened on a socket file, and its hello named the path: the agent
  # still connects to one, so that such a client hears why it cannot go on, not nothing.
  def test_protocol_2_client_is_told_the_version
    t = target('sleep')
    Dir.mktmpdir('tracer-fake-') do |dir|
      reply = fake_client(t.pid, path: File.join(dir, 'sock')) do |sock|
        sock.write(MiniPack.pack([1, 2, Process.pid]))
        read_all(sock)
      end
      assert_includes reply, "\x93\x41\x01".b, 'no ERROR/TRC_ERR_VERSION reply'
      assert_includes reply, "protocol version #{PROTOCOL_VERSION} expected, client speaks 2"
    end
    assert t.alive?
  end

  # --fork prints the copy's pid into commands to paste: only a number that is the target's
  # child gets there, whatever the target answers.
  { 'fork_text' => /answered '12; touch \/tmp\/tracer-pwned', which is no child of it/,
    'fork_pid1' => /answered '1', which is no child of it/ }.each do |mode, why|
    define_method("test_fork_reply_#{mode}_is_refused") do
      t = target(mode, agent: false, script: FAKE_AGENT)
      out, err, status = tracer('-p', t.pid, '--fork')
      assert_equal 1, status.exitstatus, err
      assert_empty out
      assert_match(/\Atracer: fork failed: process #{t.pid} #{why}$/, err)
      refute_match(/gdb|kill -CONT/, err)
    end
  end

  # The client's peak resident memory while it runs, in MiB, sampled until it exits.
  def peak_rss_while(c)
    peak = 0
    until (status = c.instance_variable_get(:@wait)).join(0.05)
      kb = File.read("/proc/#{c.pid}/status")[/^VmRSS:\s+(\d+)/, 1] rescue nil # rubocop:disable Style/RescueModifier
      peak = [peak, kb.to_i / 1024].max
    end
    status.value
    peak
  end

  # An agent that never stops sending (and never confirms a detach): --duration and Ctrl-C
  # still end the session within 2 s (the client gives up 1.8 s after the detach), and the trace
  # so far is kept. Measured from here, the client's end comes later on a loaded machine, which
  # may leave it no CPU for a while: LATE allows that, far short of a client that waits on.
  LATE = 1.5

  def test_endless_stream_ends_with_duration
    t = target('stream_calls', agent: false, script: FAKE_AGENT)
    c = client('-p', t.pid, '-m', 'K#m', '--duration', '1', '-o', '/dev/null')
    c.wait_for(/^\*\*\* attached to process #{t.pid}$/)
    attached = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    status = c.finish(within: 10)
    took = Process.clock_gettime(Process::CLOCK_MONOTONIC) - attached
    assert_operator took, :<, 1 + 1.8 + LATE, "ended #{took.round(2)} s after attaching, with --duration 1"
    assert status.success?, c.err
    assert_match(/^\*\*\* process #{t.pid} still sent its trace 1\.8 s after the detach: the rest is left out\n\*\*\* detached from process #{t.pid}\n\z/, c.err)
  end

  def test_endless_stream_ends_with_one_sigint
    t = target('stream_calls', agent: false, script: FAKE_AGENT)
    c = client('-p', t.pid, '-m', 'K#m', '-o', '/dev/null')
    c.wait_for(/^\*\*\* attached to process #{t.pid}$/)
    c.signal('INT')
    signalled = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    status = c.finish(within: 10)
    took = Process.clock_gettime(Process::CLOCK_MONOTONIC) - signalled
    assert_operator took, :<, 1.8 + LATE, "ended #{took.round(2)} s after one SIGINT"
    assert status.success?, c.err
    assert_match(/still sent its trace/, c.err)
  end

  # New methods with 60 KB names, without end: the client's tables are bounded in bytes, and
  # past the bound the trace ends as a protocol error, with the client's memory still small.
  def test_endless_definitions_are_bounded_in_bytes
    t = target('stream_defs', agent: false, script: FAKE_AGENT)
    c = client('-p', t.pid, '-m', 'K#m', '-o', '/dev/null')
    peak = peak_rss_while(c)
    c.finish
    assert_match(/^tracer: protocol error from process #{t.pid}: method and thread names past 32 MiB$/, c.err)
    assert_operator peak, :<, 200, "peak RSS #{peak} MiB"
    # To a file, whose spool keeps the bytes to format them later: bounded all the same, as
    # they come, not gigabytes later.
    t = target('stream_defs', agent: false, script: FAKE_AGENT)
    Dir.mktmpdir do |dir|
      path = File.join(dir, 'trace.txt')
      c = client('-p', t.pid, '-m', 'K#m', '-o', path)
      peak = peak_rss_while(c)
      c.finish
      assert_match(/^tracer: protocol error from process #{t.pid}: method and thread names past 32 MiB$/, c.err)
      assert_operator peak, :<, 200, "peak RSS #{peak} MiB"
      assert_operator File.size(path), :<, 64 << 20
    end
  end

  # Ctrl-C while the agent puts its hooks in: its SPEC and STARTED cross the client's DETACH,
  # and are no protocol error (they were, in 4 of 40 runs against a real agent).
  def test_sigint_while_attaching_crosses_started
    t = target('slow_start', agent: false, script: FAKE_AGENT)
    c = client('-p', t.pid, '-m', 'K#m')
    t.wait_for(/^got trace$/)
    c.signal('INT')
    status = c.finish
    refute_match(/protocol error/, c.err)
    assert status.success?, c.err
    assert_match(/^\*\*\* detached from process #{t.pid}$/, c.err)
  end

  # The same against real agents, at whatever point of the attach the signal lands.
  def test_sigint_at_any_point_of_the_attach
    t = target('sleep')
    10.times do |i|
      c = client('-p', t.pid, '-m', 'Worker#work')
      sleep(0.005 * i) # where in the attach the signal lands; any outcome but an error of protocol
      c.signal('INT')
      c.finish
      refute_match(/protocol error/, c.err)
    end
    assert_equal "=> 1\n", tracer('-p', t.pid, '-e', '1').first
  end

  # "disabled" only for the code that means it; an agent whose check raised (still loading)
  # says so with another code, and the client must not call that disabled.
  def test_eval_refusals_say_what_they_are
    t = target('refuse_4', agent: false, script: FAKE_AGENT)
    _, err, status = tracer('-p', t.pid, '-e', '1')
    assert_equal 1, status.exitstatus
    assert_equal "tracer: eval is disabled in process #{t.pid} (TRACER_AGENT_EVAL=0 or TracerAgent.allow_eval = false)\n", err,
                 how_it_ended(t)
    t = target('refuse_6', agent: false, script: FAKE_AGENT)
    _, err, status = tracer('-p', t.pid, '-e', '1')
    assert_equal 1, status.exitstatus
    refute_match(/disabled/, err)
    assert_match(/^tracer: cannot tell whether evals are allowed: NoMethodError/, err, how_it_ended(t))
  end

  private

  # For a failure: whether the fake agent still runs (it never exits on its own), and what it printed.
  def how_it_ended(t) = "the fake agent (#{t.alive? ? 'running' : t.status.inspect}): #{t.out}#{t.err}"
end
