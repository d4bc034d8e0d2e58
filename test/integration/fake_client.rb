# fake_client.rb: the client's side of the attach done by hand (queue, hello, socket, SIGURG),
# for tests that must send what the real client never would.
require 'fiddle'
require 'socket'

# The SysV message queue calls, from libc.
module SysV
  LIBC = Fiddle.dlopen(nil)
  INT = Fiddle::TYPE_INT
  MSGGET = Fiddle::Function.new(LIBC['msgget'], [INT, INT], INT)
  MSGSND = Fiddle::Function.new(LIBC['msgsnd'], [INT, Fiddle::TYPE_VOIDP, Fiddle::TYPE_SIZE_T, INT], INT)
  MSGCTL = Fiddle::Function.new(LIBC['msgctl'], [INT, INT, Fiddle::TYPE_VOIDP], INT)
  IPC_CREAT = 0o1000
  IPC_NOWAIT = 0o4000
  IPC_RMID = 0
  HELLO_MAGIC = 0x54524331
  HELLO_SIZE = 120 # struct trc_hello without its long mtype

  module_function

  def key(pid) = 0x74000000 | (pid & 0xffffff)

  def create(pid)
    q = MSGGET.call(key(pid), IPC_CREAT | 0o600)
    raise "msgget: #{Fiddle.last_error}" if q.negative?

    q
  end

  # Queues body with mtype; false when the queue is full.
  def send(q, mtype, body)
    msg = [mtype].pack('q<') + body.b
    return true if MSGSND.call(q, msg, body.bytesize, IPC_NOWAIT).zero?
    return false if Fiddle.last_error == Errno::EAGAIN::Errno

    raise "msgsnd: #{Fiddle.last_error}"
  end

  def remove(q) = MSGCTL.call(q, IPC_RMID, nil)
end

# Just enough msgpack to speak to an agent.
module MiniPack
  module_function

  def pack(v)
    case v
    when Integer then v < 128 ? [v].pack('C') : "\xcf".b + [v].pack('Q>')
    when String then [0xdb, v.bytesize].pack('CN') + v.b
    when nil then "\xc0".b
    when false then "\xc2".b
    when true then "\xc3".b
    when Array then [0x90 | v.size].pack('C') + v.map { |e| pack(e) }.join.b
    end
  end
end

module FakeClient
  # The client's side of the attach, by hand: socket (an abstract name unless path is given),
  # hello in the queue, SIGURG.
  def fake_client(pid, path: nil)
    addr = path || "@tracer-#{Process.pid}-#{pid}-#{format('%016x', rand(1 << 64))}"
    server = UNIXServer.new(path || "\0#{addr[1..]}")
    q = SysV.create(pid)
    hello = [SysV::HELLO_MAGIC, PROTOCOL_VERSION, Process.pid, addr].pack('L<L<l<a108')
    assert SysV.send(q, 1, hello)
    sock = wait_until(message: 'the agent to connect') do
      Process.kill('URG', pid)
      IO.select([server], nil, nil, 0.02) && server.accept
    end
    SysV.remove(q)
    q = nil
    yield sock
  ensure
    sock&.close
    server&.close
    SysV.remove(q) if q
  end

  def read_all(sock)
    data = +''.b
    Timeout.timeout(WAIT) do
      loop { data << sock.readpartial(65_536) }
    rescue EOFError, Errno::ECONNRESET
      nil
    end
    data
  end
end
