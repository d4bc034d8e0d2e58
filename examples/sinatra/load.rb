# load.rb URL SECONDS [CONNECTIONS]: a bounded request loop against a local server (no wrk
# needed). Each connection is made again every few requests: a Puma worker keeps a
# keep-alive connection it accepted, so without new ones all of them may stay with one worker.
require 'net/http'
uri = URI(ARGV.fetch(0))
seconds = Float(ARGV.fetch(1, '5'))
REQUESTS_PER_CONNECTION = 10
paths = (1..20).map { |i| "/price/item#{i}" } + ['/report'] * 5
counts = Array.new(Integer(ARGV.fetch(2, '4'))) do |c|
  Thread.new do
    deadline = Time.now + seconds
    n = 0
    while Time.now < deadline
      Net::HTTP.start(uri.host, uri.port) do |http|
        REQUESTS_PER_CONNECTION.times do
          http.get(paths[(n + c * 7) % paths.size])
          n += 1
        end
      end
    end
    n
  end
end.map(&:value)
puts "#{counts.sum} requests"
