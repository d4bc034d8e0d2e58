# frozen_string_literal: true

# metrics_scrape.rb: the client's CPU while it serves --metrics to a fast scraper. Two targets
# call 30 methods a few thousand times a second each (so the counts change every tick, as a
# loaded app's do); `tracer -p A -p B --top calls --metrics` serves them; a scraper here GETs
# /metrics RATE times a second for SECONDS, and the client's CPU time (utime + stime from
# /proc/PID/stat) over that window is printed as a share of one core, user and system apart.
# Each run is three windows on the same client: no scrapes, a new connection per scrape
# (Connection: close), one kept-alive connection (it reconnects when the server closes).
#
#   ruby test/bench/metrics_scrape.rb [--runs 3] [--rate 1000] [--seconds 10] [--tracer PATH]
#
# Prints one line per window and run, then the medians. Needs `make all` (client and agent).
require 'optparse'
require 'socket'
require 'tmpdir'

ROOT = File.expand_path('../..', __dir__)
opts = { runs: 3, rate: 1000, seconds: 10.0, tracer: File.join(ROOT, 'client', 'tracer'), interval: 1.0 }
OptionParser.new do |o|
  o.on('--runs N', Integer) { |v| opts[:runs] = v }
  o.on('--rate N', Integer, 'scrapes a second') { |v| opts[:rate] = v }
  o.on('--seconds S', Float, 'length of each window') { |v| opts[:seconds] = v }
  o.on('--tracer PATH', 'the client to measure') { |v| opts[:tracer] = v }
  o.on('--interval S', Float, "tracer's --interval (1)") { |v| opts[:interval] = v }
end.parse!

TARGET = <<~RUBY
  $stdout.sync = true
  30.times { |i| Object.define_method(:"work_\#{i}") { |x| x + i } }
  puts "ready \#{Process.pid}"
  loop do
    30.times { |i| 100.times { |x| send(:"work_\#{i}", x) } }
    sleep 0.01
  end
RUBY

HZ = 100 # USER_HZ: /proc/PID/stat's clock ticks (Linux's fixed ABI value)

def cpu(pid)
  f = File.read("/proc/#{pid}/stat").sub(/\A.*\) /, '').split
  [Integer(f[11]), Integer(f[12])] # utime, stime (fields 14 and 15)
end

def wait_until(secs, what)
  limit = Process.clock_gettime(Process::CLOCK_MONOTONIC) + secs
  until (v = yield)
    raise "timed out: #{what}" if Process.clock_gettime(Process::CLOCK_MONOTONIC) > limit

    sleep 0.05
  end
  v
end

def read_response(s)
  head = +''
  head << s.readpartial(65_536) until head.include?("\r\n\r\n")
  h, body = head.split("\r\n\r\n", 2)
  len = Integer(h[/^Content-Length: (\d+)\r?$/i, 1])
  body << s.read(len - body.bytesize) while body.bytesize < len
  [h, body]
end

REQ_CLOSE = "GET /metrics HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n"
REQ_KEEP = "GET /metrics HTTP/1.1\r\nHost: bench\r\n\r\n"

# rate GETs a second for secs; returns [scrapes, connections, body bytes of the last].
def scrape_loop(port, rate, secs, keep)
  t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  n = conns = 0
  bytes = 0
  s = nil
  while (now = Process.clock_gettime(Process::CLOCK_MONOTONIC)) - t0 < secs
    due = t0 + n.fdiv(rate)
    sleep(due - now) if due > now
    unless s
      s = TCPSocket.new('127.0.0.1', port)
      conns += 1
    end
    s.write(keep ? REQ_KEEP : REQ_CLOSE)
    h, body = read_response(s)
    bytes = body.bytesize
    if !keep || h =~ /^Connection: close\r?$/i
      s.close
      s = nil
    end
    n += 1
  end
  s&.close
  [n, conns, bytes]
end

def run_once(opts)
  dir = Dir.mktmpdir('metrics-scrape')
  pids = []
  targets = Array.new(2) do
    r, w = IO.pipe
    pid = spawn(RbConfig.ruby, "-I#{ROOT}/lib", '-rtracer_agent', '-e', TARGET, out: w, chdir: ROOT)
    w.close
    pids << pid
    r.gets or raise 'target died'
    pid
  end
  port = TCPServer.open('127.0.0.1', 0) { |s| s.addr[1] }
  tracer = spawn(opts[:tracer], *targets.flat_map { |t| ['-p', t.to_s] }, '--top', 'calls',
                 '--interval', opts[:interval].to_s, '--metrics', "127.0.0.1:#{port}",
                 out: File::NULL, err: File.join(dir, 'err'))
  pids << tracer
  wait_until(30, 'two targets attached') do
    TCPSocket.open('127.0.0.1', port) do |s|
      s.write(REQ_CLOSE)
      read_response(s)[1][/^tracer_targets (\d+)/, 1] == '2'
    end
  rescue SystemCallError, EOFError
    false
  end
  sleep 2 * opts[:interval] # the counts of every method in: the table stops growing
  windows = { 'idle' => nil, 'close' => false, 'keep-alive' => true }
  windows.map do |name, keep|
    u0, s0 = cpu(tracer)
    t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    n, conns, bytes = keep.nil? ? (sleep(opts[:seconds]) && [0, 0, 0]) : scrape_loop(port, opts[:rate], opts[:seconds], keep)
    wall = Process.clock_gettime(Process::CLOCK_MONOTONIC) - t0
    u1, s1 = cpu(tracer)
    { name:, n:, conns:, bytes:, wall:, user: (u1 - u0).fdiv(HZ) / wall * 100, sys: (s1 - s0).fdiv(HZ) / wall * 100 }
  end
ensure
  pids.reverse_each do |pid|
    Process.kill('TERM', pid)
  rescue Errno::ESRCH
    nil
  end
  pids.each { |pid| Process.wait(pid) rescue nil } # rubocop:disable Style/RescueModifier
  FileUtils.rm_rf(dir) if dir
end

require 'fileutils'
puts format('%s, %d scrapes/s for %.0f s, load average %s', opts[:tracer], opts[:rate], opts[:seconds],
            File.read('/proc/loadavg').split.first(3).join(' '))
results = Array.new(opts[:runs]) do |i|
  run_once(opts).each do |w|
    puts format('run %d %-10s %6d scrapes (%5.0f/s) on %5d connections, %5d-byte body: ' \
                'user %5.2f%% + system %5.2f%% = %5.2f%% of a core',
                i + 1, w[:name], w[:n], w[:n] / w[:wall], w[:conns], w[:bytes], w[:user], w[:sys], w[:user] + w[:sys])
  end
end
median = ->(a) { a.sort[a.size / 2] }
results.transpose.each do |ws|
  puts format('median %-10s user %5.2f%% + system %5.2f%% = %5.2f%% of a core (total of each run: %s)',
              ws[0][:name], median.(ws.map { _1[:user] }), median.(ws.map { _1[:sys] }),
              median.(ws.map { _1[:user] + _1[:sys] }), ws.map { format('%.2f', _1[:user] + _1[:sys]) }.join(' '))
end
puts format('load average after: %s', File.read('/proc/loadavg').split.first(3).join(' '))
