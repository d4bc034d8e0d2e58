# config.ru: `puma -w 4 examples/sinatra/config.ru` for a cluster of four workers.
$LOAD_PATH.unshift File.expand_path('../../lib', __dir__)
require_relative 'app'
run Shop
