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

  # Each trace runs until what it looks for shows up: the load, a Ruby process started in
  # setup, may take seconds to reach a worker on a loaded machine, which a fixed --duration missed.
  def test_method_trace_shows_sinatra_and_app_methods
    args = @workers.flat_map { |w| ['-p', w] }
    c = client(*args, '-m', 'Inventory.find(name)', 'Sinatra::Base#call')
    c.wait_for(/Sinatra::Base#call\n.*Inventory\.find\(name="item\d+"\) <[\d.]+>/m, stream: :out)
    c.signal('INT')
    assert c.finish.success?, c.err
    @workers.each { |w| assert_match(/detached from process #{w}/, c.err) }
  end

  def test_slow_requests_are_found
    c = client('-p', @workers.first, '-s', '20')
    c.wait_for(/Inventory\.find <(0\.0[3-9]|0\.[1-9]|[1-9]\d*\.)\d+>/, stream: :out) # 30 ms, or more at load
    c.signal('INT')
    assert c.finish.success?, c.err
    # A Sinatra route is a method Sinatra took out of the class: only the VM's hooks see it.
    c = client('-p', @workers.last, '-s', '20', '--all', '--yes')
    c.wait_for(/Shop#GET \/price\/:name <(0\.0[3-9]|0\.[1-9]|[1-9]\d*\.)\d+>/, stream: :out)
    c.signal('INT')
    assert c.finish.success?, c.err
  end

  # A Sinatra route is a method Sinatra defines, takes as an UnboundMethod and removes: no
  # wrapper can take its place, a TracePoint on it alone sees it, named as the issue spells it.
  def test_a_route_by_its_name_with_spaces
    c = client('-p', @workers.first, '-m', 'Shop#GET /price/:name', 'Inventory.find(name)', 'GET /report')
    # A call in full, on one thread (its lines carry the thread's name when several trace).
    c.wait_for(%r{^(\[[^\]]+\] |)Shop#GET /price/:name\n\1  Inventory\.find\(name="item\d+"\) <[\d.]+>\n\1Shop#GET /price/:name <[\d.]+>$},
               stream: :out)
    c.wait_for(%r{^(\[[^\]]+\] |)Shop#GET /report <[\d.]+>$}, stream: :out)
    c.signal('INT')
    assert c.finish.success?, c.err
    assert_equal 'ok', get('/health') # and the app serves on after detach
  end

  # Tables until one counts Inventory.find in both workers: the load, started in setup, may
  # take seconds to reach the second worker on a loaded machine, which a fixed --duration missed.
  def test_top_calls_across_the_cluster
    args = @workers.flat_map { |w| ['-p', w] }
    c = client(*args, '--top', 'calls', '--interval', '0.3', '--json')
    both = lambda do |table, name|
      row = table['rows'].find { |r| r['method'] == name }
      row if row && row['pids'] == 2
    end
    # A route, which only an UnboundMethod holds, is counted where a TracePoint on it leaves
    # nothing behind after detach: Ruby 3.3 and later (wrap.rb, TRACE_DETACHED). (On 3.1 a
    # worker still loading the app when tracer attached has its routes wrapped as Sinatra
    # defines them, so they may show there too.)
    table = begin
      wait_until(message: 'Inventory.find counted in both workers') do
        c.out.lines.reverse_each.lazy.map { |l| parse(l) }.find do |t|
          t && both.(t, 'Inventory.find') && (RUBY_VERSION < '3.3' || both.(t, 'Shop#GET /price/:name'))
        end
      end
    rescue RuntimeError => e
      flunk "#{e.message}; the last table: #{c.out.lines.last}#{c.err}"
    end
    c.signal('INT')
    assert c.finish.success?, c.err
    assert_match(%r{examples/sinatra/app\.rb\z}, both.(table, 'Inventory.find')['file'])
    assert_equal 24, both.(table, 'Shop#GET /price/:name')['line'] if RUBY_VERSION >= '3.3'
    @workers.each { |w| assert_match(/detached from process #{w}/, c.err) }
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

  def parse(line)
    JSON.parse(line)
  rescue JSON::ParserError
    nil
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
