# load.rb URL SECONDS [CONNECTIONS]: a bounded request loop against a local server (no wrk
# needed). Several connections, so every Puma worker gets some of them.
require 'net/http'
uri = URI(ARGV.fetch(0))
seconds = Float(ARGV.fetch(1, '5'))
paths = (1..20).map { |i| "/price/item#{i}" } + ['/report'] * 5
counts = Array.new(Integer(ARGV.fetch(2, '4'))) do |c|
  Thread.new do
    deadline = Time.now + seconds
    n = 0
    Net::HTTP.start(uri.host, uri.port) do |http|
      while Time.now < deadline
        http.get(paths[(n + c * 7) % paths.size])
        n += 1
      end
    end
    n
  end
end.map(&:value)
puts "#{counts.sum} requests"
