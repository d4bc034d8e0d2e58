# example_test.rb: the Sinatra example served by a Puma cluster, under load, traced for real.
require_relative 'helper'
require 'net/http'
require 'socket'

class ExampleTest < Minitest::Test
  include TracerTest

  APP = File.join(ROOT, 'examples', 'sinatra')

  def setup
    super
    @port = TCPServer.open('127.0.0.1', 0) { |s| s.addr[1] }
    @puma = Process.spawn(*puma, '-w', '2', '-b', "tcp://127.0.0.1:#{@port}", File.join(APP, 'config.ru'),
                          out: File::NULL, err: File::NULL, pgroup: true)
    wait_until(message: 'puma up') { get('/health') == 'ok' }
    @workers = wait_until(message: 'two workers') do
      pids = `pgrep -P #{@puma}`.split.map(&:to_i)
      pids if pids.size == 2 && pids.all? { |p| agent_loaded?(p) }
    end
    @load = Process.spawn(RUBY, File.join(APP, 'load.rb'), "http://127.0.0.1:#{@port}", '120', '6', out: File::NULL)
  end

  def teardown
    super
    [@load].compact.each { |p| Process.kill('KILL', p) rescue nil }
    Process.kill('-TERM', @puma) rescue nil
    Process.wait(@puma) rescue nil
    Process.wait(@load) rescue nil
  end

  def test_method_trace_shows_sinatra_and_app_methods
    args = @workers.flat_map { |w| ['-p', w] }
    out, err, status = tracer(*args, '-m', 'Inventory.find(name)', 'Sinatra::Base#call', '--duration', '1.5')
    assert status.success?, err
    assert_match(/Sinatra::Base#call\n.*Inventory\.find\(name="item\d+"\) <[\d.]+>/m, out)
    @workers.each { |w| assert_match(/detached from process #{w}/, err) }
  end

  # Traced until a slow call shows up: the load, a Ruby process started in setup, may take
  # seconds to send its first request on a loaded machine, which a fixed --duration missed.
  def test_slow_requests_are_found
    c = client('-p', @workers.first, '-s', '20')
    c.wait_for(/Inventory\.find <0\.0[3-9]\d+>/, stream: :out)
    c.signal('INT')
    assert c.finish.success?, c.err
    # A Sinatra route is a method Sinatra took out of the class: only the VM's hooks see it.
    c = client('-p', @workers.last, '-s', '20', '--all', '--yes')
    c.wait_for(/Shop#GET \/price\/:name <0\.0[3-9]\d+>/, stream: :out)
    c.signal('INT')
    assert c.finish.success?, c.err
  end

  # A Sinatra route is a method Sinatra defines, takes as an UnboundMethod and removes: no
  # wrapper can take its place, a TracePoint on it alone sees it, named as the issue spells it.
  def test_a_route_by_its_name_with_spaces
    out, err, status = tracer('-p', @workers.first, '-m', 'Shop#GET /price/:name', 'Inventory.find(name)',
                              'GET /report', '--duration', '1.5')
    assert status.success?, err
    # A call in full, on one thread (its lines carry the thread's name when several trace).
    call = %r{^(\[[^\]]+\] |)Shop#GET /price/:name\n\1  Inventory\.find\(name="item\d+"\) <[\d.]+>\n\1Shop#GET /price/:name <[\d.]+>$}
    assert call.match?(out), "no route call with its Inventory.find in:\n#{out[0, 2000]}"
    assert_match(%r{^(\[[^\]]+\] |)Shop#GET /report <[\d.]+>$}, out[0, 200_000])
    assert_equal 'ok', get('/health') # and the app serves on after detach
  end

  def test_top_calls_across_the_cluster
    args = @workers.flat_map { |w| ['-p', w] }
    out, err, status = tracer(*args, '--top', 'calls', '--duration', '1.5', '--json')
    assert status.success?, err
    table = JSON.parse(out.lines.last)
    find = table['rows'].find { |r| r['method'] == 'Inventory.find' }
    assert find, "no Inventory.find row in #{table['rows'].map { |r| r['method'] }}"
    assert_equal 2, find['pids']
    assert_match(%r{examples/sinatra/app\.rb\z}, find['file'])
    # A route, which only an UnboundMethod holds, is counted where a TracePoint on it leaves
    # nothing behind after detach: Ruby 3.3 and later (wrap.rb, TRACE_DETACHED). (On 3.1 a
    # worker still loading the app when tracer attached has its routes wrapped as Sinatra
    # defines them, so they may show there too.)
    route = table['rows'].find { |r| r['method'] == 'Shop#GET /price/:name' }
    if RUBY_VERSION >= '3.3'
      assert route, "no route row in #{table['rows'].map { |r| r['method'] }}"
      assert_equal 24, route['line']
      assert_equal 2, route['pids']
    end
  end

  private

  # Puma run by the Ruby under test. TRACER_PUMA names its script where the Ruby's own gems lack
  # it (make test-rubies builds Puma from Debian's source for a Ruby Debian built none for).
  def puma
    cmd = [RUBY, ENV['TRACER_PUMA'] || Gem.bin_path('puma', 'puma')]
    nio = system(RUBY, '-e', 'require "nio"', out: File::NULL, err: File::NULL)
    nio ? cmd : cmd + ['-C', File.join(ROOT, 'test', 'apps', 'puma_no_reactor.rb')]
  rescue Gem::Exception => e
    flunk "Puma is missing for #{RUBY} (#{e.message}): apt-get install puma, or make test-rubies"
  end

  def get(path)
    Net::HTTP.get(URI("http://127.0.0.1:#{@port}#{path}"))
  rescue SystemCallError, EOFError
    nil
  end

  def agent_loaded?(pid)
    File.read("/proc/#{pid}/maps").include?('tracer_agent.so')
  rescue SystemCallError
    false
  end
end
