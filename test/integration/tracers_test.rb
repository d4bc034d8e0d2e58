# tracers_test.rb: -c, tracer files: each bundled one on a real workload (the ActiveRecord
# example over SQLite, the Sinatra example's Net::HTTP load client, the demo's shop), and files
# of one's own.
require_relative 'helper'
require 'socket'

class TracersTest < Minitest::Test
  include TracerTest

  SINATRA = File.join(ROOT, 'examples', 'sinatra')
  AR_APP = File.join(ROOT, 'examples', 'activerecord', 'app.rb')
  DURATION = /<\d+\.\d{9}>/

  def setup
    super
    @dir = Dir.mktmpdir('tracer-tracers')
  end

  def teardown
    super
    FileUtils.rm_rf(@dir)
    @server&.close
    @server_thread&.kill
  end

  def exec_tracer(*args, **opts)
    tracer(*args, env: { 'TRACER_AGENT_LIB' => File.expand_path(AGENT_LIB) }, **opts)
  end

  # A keep-alive HTTP server in the test process, for the Sinatra example's Net::HTTP client
  # (load.rb): what the client does is what is traced, and any Ruby has what this needs.
  def start_server
    @server = TCPServer.new('127.0.0.1', 0)
    @port = @server.addr[1]
    @server_thread = Thread.new do
      loop do
        conn = @server.accept
        Thread.new(conn) do |c|
          while (line = c.gets)
            next unless line == "\r\n"

            c.write("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")
          end
        rescue IOError, SystemCallError
          nil
        ensure
          c.close
        end
      end
    rescue IOError
      nil
    end
  end

  # load.rb, the example's Net::HTTP client, started by tracer for secs over 2 connections.
  def load_traced(*args, secs: '0.5')
    start_server
    exec_tracer(*args, '-x', RUBY, File.join(SINATRA, 'load.rb'), "http://127.0.0.1:#{@port}", secs, '2')
  end

  def test_activerecord_shows_every_statement_with_its_text_and_duration
    out, err, status = exec_tracer('-c', 'activerecord', '-x', RUBY, AR_APP, '2')
    assert status.success?, err
    log = 'ActiveRecord::ConnectionAdapters::AbstractAdapter#log'
    # ActiveRecord 7 adds RETURNING, and runs a deferred BEGIN inside the INSERT's log: the call's
    # line then opens, and its duration is on the line that closes it.
    insert = /^#{log}\(sql="INSERT INTO \\"orders\\" \(\\"customer\\"\) VALUES \(\?\)(?: RETURNING \\"id\\")?", name="Order Create", type_casted_binds=\["customer(\d)"\]\)(?: #{DURATION})?$/
    assert_equal %w[1 2], out.scan(insert).flatten, out
    assert_match(/^#{log}\(sql="CREATE TABLE IF NOT EXISTS \\"products\\" /, out)
    assert_match(/^ *#{log}\(sql="begin transaction", name="TRANSACTION", .*\) #{DURATION}$/, out)
    # The N+1 of Order#total_cents: one product query per line item.
    products = out.scan(/^#{log}\(sql="SELECT \\"products\\".\* FROM \\"products\\" WHERE \\"products\\".\\"id\\" = \? LIMIT \?", name="Product Load", type_casted_binds=\[\d, 1\]\) #{DURATION}$/)
    assert_equal 4, products.size, out
    assert_match(/^order 2: \d+ cents$/, out)
    refute_match(/matched no method/, err)
  end

  def test_http_shows_each_request
    out, err, status = load_traced('-c', 'http')
    assert status.success?, err
    request = /^\[thread-\d+\] Net::HTTP#transport_request\(req.method="GET", address="127.0.0.1", port=#{@port}, req.path="(\/[a-z0-9\/]+)"\) #{DURATION}$/
    paths = out.scan(request).flatten
    assert_operator paths.size, :>=, 2, out
    assert paths.all? { |p| p.start_with?('/price/item', '/report') }, paths.inspect
  end

  def test_io_shows_socket_reads_and_writes
    out, err, status = load_traced('-c', 'io')
    assert status.success?, err
    # Net::HTTP connects through TCPSocket, or through Socket.tcp where the net-http gem is newer.
    socket = /self=#<(?:TCP)?Socket:fd \d+(?:, AF_INET, 127.0.0.1, \d+)?>/
    assert(/BasicSocket#write_nonblock\(#{socket}\) #{DURATION}$/.match?(out), "no socket write in:\n#{out[0, 3000]}")
    assert(/BasicSocket#read_nonblock\(#{socket}\) #{DURATION}$/.match?(out), "no socket read in:\n#{out[0, 3000]}")
  end

  def test_threads_shows_joins
    out, err, status = load_traced('-c', 'threads')
    assert status.success?, err
    # Each connection's thread, joined by the main one, which waits the whole run for the first.
    # (3.4 with YJIT runs Array#map in Ruby: the caller is then <internal:array>.)
    assert_match(%r{^(\[main\] )?Thread#value\(self=#<Thread:0x\h+ .*examples/sinatra/load\.rb:\d+ \w+>, __source__="(.*examples/sinatra/load\.rb|<internal:array>):\d+"\)}, out)
    # Its end: on the call's own line, or on a line of its own when calls were nested in it. At
    # least 0.4 s; a loaded machine can make it a second and more.
    assert(/^(\[main\] )?Thread#value(\(self=.*\))? <(0\.[4-9]|[1-9]\d*\.)\d+>$/.match?(out), "no long join in:\n#{out[0, 3000]}")
  end

  # The demo's app (examples/shop.rb), which sleeps 0.2 s between orders, forever.
  def test_sleep_shows_where_and_how_long
    c = client('-c', 'sleep', '-x', RUBY, File.join(ROOT, 'examples', 'shop.rb'))
    c.wait_for(%r{^Kernel#sleep\(args=\[0.2\], __source__=".*examples/shop\.rb:\d+"\) <(0\.[2-9]|[1-9]\d*\.)\d+>$}, stream: :out)
    c.signal('TERM') # passed on to the app
    assert_equal 128 + Signal.list['TERM'], c.finish.exitstatus, c.err
  end

  def test_a_file_of_ones_own_with_m
    path = File.join(@dir, 'mine.tracer')
    File.write(path, "# my app\n\n  Object#price(item)  \n# Object#ignored\n")
    s = File.join(@dir, 'app.rb')
    File.write(s, "def price(item) = item.size\ndef total = price('fig')\ntotal\n")
    out, err, status = exec_tracer('-c', path, '-m', 'Object#total', '-x', RUBY, s)
    assert status.success?, err
    assert_match(/\AObject#total\n  Object#price\(item="fig"\) #{DURATION}\nObject#total #{DURATION}\n\n\z/, out)
  end

  def test_bad_tracer_files_are_usage_errors
    bad = File.join(@dir, 'bad.tracer')
    File.write(bad, "# fine so far\nObject#price\n\nOrder#total(sql\n")
    _, err, status = tracer('-c', bad, '-x', 'true')
    assert_equal 2, status.exitstatus
    assert_match(/\Atracer: #{Regexp.escape(bad)}:4: invalid method spec 'Order#total\(sql': unbalanced parentheses$/, err)
    empty = File.join(@dir, 'empty.tracer')
    File.write(empty, "# nothing\n\n")
    _, err, status = tracer('-c', empty, '-p', 1)
    assert_equal 2, status.exitstatus
    assert_match(/tracer file '#{Regexp.escape(empty)}' lists no method/, err)
    _, err, status = tracer('-c', 'no-such-tracer', '-p', 1)
    assert_equal 2, status.exitstatus
    assert_match(/no tracer file 'no-such-tracer', and no bundled tracer of that name \(bundled: activerecord, http, io, sleep, threads\)/, err)
    _, err, status = tracer('-c', @dir, '-p', 1) # a directory
    assert_equal 2, status.exitstatus
    assert_match(/no tracer file/, err)
  end

  # Every bundled file parses, and says what it is for on its first line.
  def test_bundled_files_are_well_formed
    Dir[File.join(ROOT, 'share', 'tracer', 'tracers', '*.tracer')].each do |path|
      name = File.basename(path, '.tracer')
      assert_match(/\A# #{name}: /, File.read(path))
      _, err, status = tracer('-c', name, '-x', 'true') # not Ruby: it never connects
      assert_equal 1, status.exitstatus, err
      assert_match(/never connected/, err)
    end
  end
end
