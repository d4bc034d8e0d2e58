# wrk.rb: the load on examples/redmine, for `load`, the integration test and the bench: a
# logged-in session (login), and wrk with load.lua (Wrk.new ... result), its figures parsed.
require 'net/http'
require 'uri'

module RedmineLoad
  LUA = File.join(__dir__, 'load.lua')
  USER = 'loader'            # made by instance.rb
  PASSWORD = 'tracer-load-23'

  # Logs USER in, as a browser does (the form's CSRF token, then the POST); returns the session
  # cookie ("name=value") that load.lua sends with the requests that need a member.
  # SQLite is locked while another request writes (a worker's session tokens): the login
  # answers 500 then, and is tried again, three times in all.
  def self.login(port, timeout: 60, tries: 3)
    login_once(port, timeout)
  rescue RuntimeError => e
    raise unless e.message.include?('failed (500') && (tries -= 1).positive?

    sleep 0.5
    retry
  end

  def self.login_once(port, timeout)
    http = Net::HTTP.new('127.0.0.1', port)
    http.read_timeout = timeout
    form = http.get('/login')
    raise "GET /login: #{form.code}" unless form.code == '200'

    token = form.body[/name="authenticity_token" value="([^"]+)"/, 1] or raise 'no authenticity_token in /login'
    cookie = session_cookie(form) or raise 'no session cookie from /login'
    res = http.post('/login', URI.encode_www_form(username: USER, password: PASSWORD, authenticity_token: token),
                    'Cookie' => cookie, 'Content-Type' => 'application/x-www-form-urlencoded')
    cookie = session_cookie(res) || cookie
    raise "login as #{USER} failed (#{res.code} to #{res['location']})" unless res.code == '302' && res['location'] !~ %r{/login}

    page = http.get('/my/page', 'Cookie' => cookie)
    raise "GET /my/page as #{USER}: #{page.code} (#{page['location']})" unless page.code == '200'

    cookie
  end

  def self.session_cookie(res)
    Array(res.get_fields('set-cookie')).map { |c| c.split(';').first }.find { |c| c =~ /session|Redmine/i }
  end

  # GET path until it answers 200 (the workers may still be busy with their first requests).
  def self.get(port, path, cookie: nil, timeout: 60)
    http = Net::HTTP.new('127.0.0.1', port)
    http.read_timeout = timeout
    http.get(path, cookie ? { 'Cookie' => cookie } : {})
  end

  # One run of wrk: start, then result (at the end of seconds), or stop (SIGINT: wrk prints
  # its figures for the time so far). Latencies in ms.
  class Wrk
    attr_reader :pid, :started

    def initialize(port, seconds:, cookie:, connections: 8, threads: 2, timeout: 60)
      @out = IO.pipe
      @started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
      @pid = Process.spawn({ 'REDMINE_COOKIE' => cookie }, 'wrk', "-t#{[threads, connections].min}", "-c#{connections}", "-d#{seconds.ceil}s",
                           "--timeout", "#{timeout}s", '--latency', '-s', LUA, "http://127.0.0.1:#{port}/",
                           out: @out[1], err: @out[1], in: File::NULL)
      @out[1].close
      @reader = Thread.new { @out[0].read }
    end

    def stop
      Process.kill('INT', @pid)
    rescue Errno::ESRCH
      nil
    end

    def kill
      Process.kill('KILL', @pid)
    rescue Errno::ESRCH
      nil
    end

    # Waits for wrk to end; returns its figures: {rps:, p50:, p99:, max:, requests:, errors:,
    # not200:, seconds:, text:}.
    def result(within: nil)
      waiter = Process.detach(@pid)
      unless waiter.join(within)
        # (Seen once on a machine at load 10: wrk did not end 30 s after SIGINT.) Its figures
        # are lost; the session goes on, and says so.
        kill
        waiter.join
        return Wrk.parse('').merge(text: "wrk did not end within #{within} s: killed, its figures lost\n", lost: true)
      end
      text = @reader.value
      raise "wrk failed (#{waiter.value}): #{text}" unless waiter.value.success?

      Wrk.parse(text)
    end

    def self.parse(text)
      ms = lambda do |v, unit|
        Float(v) * { 'us' => 0.001, 'ms' => 1.0, 's' => 1000.0, 'm' => 60_000.0 }.fetch(unit)
      end
      lat = ->(pct) { (m = text.match(/^\s+#{pct}%\s+([\d.]+)(us|ms|s|m)\b/)) && ms.(m[1], m[2]) }
      max = text.match(/^\s+Latency\s+\S+\s+\S+\s+([\d.]+)(us|ms|s|m)\b/)
      sock = text[/Socket errors: (.*)$/, 1]
      {
        rps: Float(text[/^Requests\/sec:\s+([\d.]+)/, 1] || 0),
        requests: Integer(text[/(\d+) requests in/, 1] || 0),
        seconds: (m = text.match(/requests in ([\d.]+)(ms|s|m)\b/)) ? ms.(m[1], m[2]) / 1000 : 0.0,
        p50: lat.(50), p99: lat.(99), max: max && ms.(max[1], max[2]),
        errors: sock ? sock.scan(/\d+/).sum(&:to_i) : 0,
        not200: Integer(text[/^not 200: (\d+)/, 1] || 0),
        text: text
      }
    end
  end

  def self.line(r)
    format('%7.1f requests/s  p50 %6.0f ms  p99 %6.0f ms  max %6.0f ms  (%d requests in %.1f s, %d not 200, %d socket errors)',
           r[:rps], r[:p50] || 0, r[:p99] || 0, r[:max] || 0, r[:requests], r[:seconds], r[:not200], r[:errors])
  end
end
