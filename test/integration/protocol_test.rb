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
end
